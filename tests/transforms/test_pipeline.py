"""The transform pipeline: order, no copy when nothing changes, checks raise ModelError naming the node."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms import PIPELINE, ModelError, PrepareOptions, apply_pipeline


def _float_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 10
    return m


def test_pipeline_names_are_unique_and_start_with_checks():
    names = [t.name for t in PIPELINE]
    assert len(names) == len(set(names))
    # The IR version first (a file-level stamp), then weights become constants (every later step and integer mode
    # see them), then domain normalization, so the Trunc check also sees Trunc nodes moved from legacy domains.
    assert names[:4] == ["fit_ir_version", "constant_initializers", "fix_legacy_domains", "check_trunc_versions"]


def test_model_that_needs_nothing_is_not_copied():
    m = _float_model()
    out, changed = apply_pipeline(m, PrepareOptions())
    assert out is m
    assert changed == []
    assert ortquant.prepare_model(m) is m


def test_int8_relu_is_reported_as_a_change():
    m = _float_model()
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.INT8
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT8
    out, changed = apply_pipeline(m, PrepareOptions())
    assert changed == ["rewrite_int8_relu"]
    assert out.graph.node[0].domain == "thinker"
    assert m.graph.node[0].domain == ""  # the input model is never modified


def test_check_raises_model_error_naming_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    node = helper.make_node("Trunc", ["x", "s", "z", "b", "o"], ["y"], name="t0", domain="qonnx.custom_op.general")
    g = helper.make_graph([node], "g", [x], [y])
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 2)]
    )
    with pytest.raises(ModelError, match="Trunc node 't0'"):
        apply_pipeline(m, PrepareOptions())
