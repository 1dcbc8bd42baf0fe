"""ONNX schemas: every op the native library registers has a schema in every domain, and the checker (full
check) and shape inference accept and type models that use them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, needs_onnx_python_inference
from ortquant.schemas import qonnx as qonnx_schemas


@pytest.fixture(autouse=True)
def _schemas() -> None:
    """What a user who wants onnx.checker / shape inference to know ortquant's ops does (README)."""
    ortquant.register_schemas()


def test_every_native_op_has_a_schema():
    missing = [(d, o) for d, o in sorted(ortquant.supported_ops()) if not onnx.defs.has(o, d)]
    assert not missing, f"ops registered in libortquant.so without an ONNX schema: {missing}"


def test_register_is_idempotent():
    ortquant.register_schemas()
    qonnx_schemas.register()
    assert onnx.defs.has("Quant", "finn.custom_op.general")


def _model(nodes, inputs, outputs, inits, domain, version):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, version)])
    m.ir_version = IR_VERSION
    return m


@needs_onnx_python_inference
@pytest.mark.parametrize("domain", qonnx_schemas.DOMAINS)
@pytest.mark.parametrize("version", [1, 2])
def test_quant_model_checks_and_infers(domain, version):
    inits = [
        numpy_helper.from_array(np.ones((1, 3, 1, 1), np.float32), "s"),
        numpy_helper.from_array(np.float32(0), "z"),
        numpy_helper.from_array(np.float32(4), "b"),
    ]
    node = helper.make_node(
        "Quant", ["x", "s", "z", "b"], ["q"], domain=domain, signed=1, narrow=0, rounding_mode="ROUND"
    )
    relu = helper.make_node("Relu", ["q"], ["y"])
    m = _model(
        [node, relu],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 8, 8])],
        inits,
        domain,
        version,
    )
    onnx.checker.check_model(m, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    vi = {v.name: v for v in inferred.graph.value_info}
    q = vi["q"].type.tensor_type
    assert q.elem_type == TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in q.shape.dim] == ["N", 3, 8, 8]


def test_unknown_attribute_is_rejected_by_checker():
    node = helper.make_node("BipolarQuant", ["x", "s"], ["y"], domain="qonnx.custom_op.general", bogus=3)
    m = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.float32(1), "s")],
        "qonnx.custom_op.general",
        2,
    )
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m, full_check=True)


def test_trunc_versions_have_their_input_counts():
    v1 = onnx.defs.get_schema("Trunc", 1, "qonnx.custom_op.general")
    v2 = onnx.defs.get_schema("Trunc", 2, "qonnx.custom_op.general")
    assert (len(v1.inputs), len(v2.inputs)) == (5, 6)
    assert {a for a in v2.attributes} >= {"signed", "narrow", "rounding_mode"}


def test_ngraph_quantize_infers_output_type():
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(3), "z")]
    node = helper.make_node("Quantize", ["x", "s", "z"], ["y"], domain="ngraph", round_mode="ROUND_NEAREST_TOWARD_EVEN")
    m = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 5])],
        inits,
        "ngraph",
        1,
    )
    onnx.checker.check_model(m, full_check=True)
    out = onnx.shape_inference.infer_shapes(m, strict_mode=True).graph.output[0].type.tensor_type
    assert out.elem_type == TensorProto.UINT8


@needs_onnx_python_inference
@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.parametrize("size,k,s,pad", [(3, 2, 2, 1), (5, 3, 2, 1), (7, 3, 3, 0), (4, 2, 2, 0), (6, 3, 2, 1)])
def test_maxpool_nhwc_inferred_shape_matches_kernel(size, k, s, pad, ceil):
    """Shape inference gives the shape the kernel produces, ceil_mode's last-window rule included."""
    from conftest import make_node_model, run_model

    x = np.arange(size * size * 2, dtype=np.float32).reshape(1, size, size, 2)
    attrs = {"kernel_shape": [k, k], "pads": [pad, pad, pad, pad], "strides": [s, s], "ceil_mode": ceil}
    model, feeds = make_node_model("MaxPoolNHWC", "qonnx.custom_op.general", [x], attrs=attrs)
    (y,) = run_model(model, feeds)
    inferred = onnx.shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape
    assert [d.dim_value for d in inferred.dim] == list(y.shape)
