"""qonnx 1.0.0's execute_onnx as the oracle for whole models (shapes inferred first, IR version 10 for the one-node
sessions qonnx creates: onnx 1.23 writes IR 14, which onnxruntime 1.31 refuses)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

IR_VERSION = 10


def qonnx_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    make_model = helper.make_model
    helper.make_model = lambda g, **kw: make_model(g, **{"ir_version": IR_VERSION, **kw})
    try:
        wrapper = ModelWrapper(model)
        try:
            wrapper = wrapper.transform(InferShapes())
        except Exception:
            pass
        return execute_onnx(wrapper, feeds)
    finally:
        helper.make_model = make_model


def ort_with_library(model_path: str, feeds: dict[str, np.ndarray], exact: bool = False) -> list[np.ndarray]:
    """A plain onnxruntime session with the ortquant library registered (what a C/C++ host does); ``exact`` sets
    the two session options docs/ops.md gives C/C++ hosts for qonnx's exact results."""
    import onnxruntime as ort

    import ortquant

    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    if exact:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"]).run(None, feeds)
