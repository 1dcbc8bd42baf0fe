"""qonnx 1.0.0 (installed in the venv) as a test oracle: run one node through qonnx's own execute_node."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

try:
    from qonnx.custom_op import registry as qonnx_registry

    HAVE_QONNX = True
except ImportError:  # pragma: no cover - qonnx not installed
    qonnx_registry = None
    HAVE_QONNX = False

DOMAIN = "qonnx.custom_op.general"


def qonnx_node(op_type: str, n_inputs: int, **attrs: Any) -> onnx.NodeProto:
    """A qonnx node with inputs in0.. and output out0."""
    return helper.make_node(op_type, [f"in{i}" for i in range(n_inputs)], ["out0"], domain=DOMAIN, **attrs)


def qonnx_execute(
    node: onnx.NodeProto,
    inputs: list[np.ndarray],
    graph: onnx.GraphProto | None = None,
    out_shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Runs qonnx's execute_node for `node` on `inputs` (bound to the node's input names) and returns output 0.

    out_shape pre-fills the output slot, for ops that read its shape (MaxPoolNHWC, QuantAvgPool2d).
    """
    assert qonnx_registry is not None
    ctx: dict[str, Any] = {name: arr for name, arr in zip(node.input, inputs, strict=True)}
    ctx[node.output[0]] = np.zeros(out_shape, np.float32) if out_shape is not None else None
    # qonnx runs standard ops (MaxPool, AveragePool) through onnxruntime in one-node models made with
    # onnx.helper.make_model, whose default IR version (14 with onnx 1.23) onnxruntime 1.31 refuses.
    make_model = helper.make_model

    def make_model_ir10(graph: onnx.GraphProto, **kwargs: Any) -> onnx.ModelProto:
        kwargs.setdefault("ir_version", 10)
        return make_model(graph, **kwargs)

    helper.make_model = make_model_ir10
    try:
        qonnx_registry.getCustomOp(node).execute_node(ctx, graph)
    finally:
        helper.make_model = make_model
    return np.asarray(ctx[node.output[0]])
