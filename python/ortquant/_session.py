"""The session helper and the model rewrites onnxruntime needs before it can load a model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import onnx

from ortquant._library import register

QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")


class ModelError(ValueError):
    """A model that ortquant cannot run as written (the message names the node and the problem)."""


def _opset_version(model: onnx.ModelProto, domain: str) -> int | None:
    for imp in model.opset_import:
        if imp.domain == domain:
            return int(imp.version)
    return None


def check_trunc_versions(model: onnx.ModelProto) -> list[str]:
    """Problems with QONNX Trunc nodes whose input count contradicts the domain's opset import.

    qonnx picks Trunc v1 (5 inputs) for opset 1 or no import, v2 (6 inputs) for opset >= 2 (decision 6).
    """
    problems = []
    for node in _all_nodes(model.graph):
        if node.op_type not in ("Trunc", "TruncQuant") or node.domain not in QONNX_DOMAINS:
            continue
        version = _opset_version(model, node.domain) or 1
        n = len(node.input)
        want = 5 if version < 2 else 6
        if n != want:
            problems.append(
                f"Trunc node '{node.name}': domain {node.domain} is imported at opset {version}, "
                f"which means Trunc v{1 if version < 2 else 2} with {want} inputs, but the node has {n}"
            )
    return problems


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_nodes(g)


def _load(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(os.fspath(model))


LINGER_DOMAINS = ("thinker", "onnxinfer")
# Standard ops that keep their first input's element type (how int8 flows through a linger graph).
_TYPE_PRESERVING = {
    "Relu", "MaxPool", "Clip", "Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Concat",
    "Split", "Slice", "Gather", "Pad", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
}  # fmt: skip


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element types of the top-level graph's values: declared ones, then onnx shape inference (best effort)."""
    types: dict[str, int] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    except Exception:
        inferred = model.graph
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types


def rewrite_int8_relu(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move default-domain ``Relu`` nodes on int8 / int32 tensors to ``thinker::Relu`` (decision 14).

    linger writes int8 ReLU as a standard ``Relu``, which onnxruntime refuses at load. The input type comes from
    the graph's declared or inferred types; where those are silent (linger ops without a registered schema), a
    value produced by a thinker/onnxinfer op other than ``Dequant``, or passed through type-preserving standard ops
    from one, is taken as an integer. Only the top-level graph is rewritten. Returns ``model`` itself when nothing
    changes, otherwise a rewritten copy (with a ``thinker`` opset import added if missing).
    """
    relus = [n for n in model.graph.node if n.op_type == "Relu" and n.domain in ("", "ai.onnx")]
    if not relus:
        return model
    types = _element_types(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    ints = {onnx.TensorProto.INT8, onnx.TensorProto.INT32}

    def is_int(value: str, depth: int = 0) -> bool:
        if value in types:
            return types[value] in ints
        node = producer.get(value)
        if node is None or depth > 64:
            return False
        if node.domain in LINGER_DOMAINS:
            return node.op_type != "Dequant"
        if node.domain in ("", "ai.onnx") and node.op_type in _TYPE_PRESERVING and node.input:
            return is_int(node.input[0], depth + 1)
        return False

    targets = {id(n) for n in relus if n.input and is_int(n.input[0])}
    if not targets:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        if node.op_type == "Relu" and node.domain in ("", "ai.onnx") and node.input and is_int(node.input[0]):
            node.domain = "thinker"
    if not any(imp.domain == "thinker" for imp in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid("thinker", 1))
    return out


def prepare_model(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """Check a model and rewrite what onnxruntime needs; returns a ModelProto (a copy when changed).

    Checks: QONNX Trunc input counts against the opset import (decision 6). Raises :class:`ModelError`.
    Rewrites: int8 ``Relu`` in the default domain to ``thinker::Relu`` (decision 14, :func:`rewrite_int8_relu`).
    """
    proto = _load(model)
    problems = check_trunc_versions(proto)
    if problems:
        raise ModelError("; ".join(problems))
    return rewrite_int8_relu(proto)


def InferenceSession(  # noqa: N802 - mirrors onnxruntime.InferenceSession
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    sess_options: Any = None,
    providers: Sequence[Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Create an ``onnxruntime.InferenceSession`` with ortquant's ops registered.

    ``model`` is a path, serialized bytes or a ModelProto. The model goes through :func:`prepare_model` first.
    ``sess_options`` is an ``onnxruntime.SessionOptions`` (a new one if None); ``providers`` defaults to CPU.
    """
    import onnxruntime as ort

    proto = prepare_model(model)
    so = sess_options if sess_options is not None else ort.SessionOptions()
    register(so)
    return ort.InferenceSession(
        proto.SerializeToString(),
        sess_options=so,
        providers=list(providers) if providers is not None else ["CPUExecutionProvider"],
        **kwargs,
    )
