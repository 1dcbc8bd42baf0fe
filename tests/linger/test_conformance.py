"""Every conformance case whose ops are all in issue 3 (tests/data/linger, exported by linger 1.1.1 with linger's
own outputs) through ortquant.InferenceSession: max abs diff 0 on every output. Plus the default-domain int8 ops
linger writes (Relu rewritten by prepare_model; Clip and MaxPool run in stock onnxruntime)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from linger_util import DATA
from onnx import TensorProto, helper

import ortquant
from conftest import IR_VERSION, assert_bitexact, needs_onnx_python_inference
from ortquant.reference import linger as ref

# Cases of tests/data/linger whose ops are all covered by the issue-3 kernels.
CASES = [
    "quant_dequant", "iqadd", "iqadd_const", "iqmul", "iqmul_const", "iqcat2", "iqcat3_negdim", "iqclamp",
    "iqsigmoid", "iqtanh", "iqdiv_const", "iqdiv_tensor", "iqsum", "avgpool_k2s2", "avgpool_k3s1p1",
    "avgpool_k3x2_s2_ceil", "avgpool_k4_float_in", "softmax", "softmax_dim1", "logsoftmax",
    # with a Conv2dInt (issue 4) in front, as linger exports Relu/Clip/MaxPool/iqPad/BatchNorm2dInt in real models
    "relu_int8", "relu6_clip", "maxpool_int8", "maxpool_int8_ceil", "iqpad", "conv_bn",
]  # fmt: skip


def _session(model: onnx.ModelProto | str, threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ortquant.InferenceSession(model, sess_options=so)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("domain", ["thinker", "onnxinfer"])
def test_case_matches_linger(case: str, domain: str) -> None:
    model = onnx.load(str(DATA / f"{case}.onnx"))
    if domain != "thinker":  # the same graph in the seed's runtime domain
        for node in model.graph.node:
            if node.domain == "thinker":
                node.domain = domain
        for imp in model.opset_import:
            if imp.domain == "thinker":
                imp.domain = domain
    data = np.load(DATA / f"{case}.npz")
    sess = _session(model)
    feeds = {i.name: data[f"x{k}"] for k, i in enumerate(sess.get_inputs())}
    outs = sess.run(None, feeds)
    assert len(outs) == len(model.graph.output)
    for k, got in enumerate(outs):
        want = data[f"y{k}"]
        assert got.dtype == np.float32 and got.shape == want.shape
        assert float(np.max(np.abs(got - want))) == 0.0, (case, k)
        assert_bitexact(got, want)


@needs_onnx_python_inference
@pytest.mark.parametrize("case", CASES)
def test_cases_pass_the_full_checker_and_infer_types(case: str) -> None:
    # prepare_model first: linger's default-domain int8 Relu (relu_int8) is invalid ONNX at opset 12 as exported.
    model = ortquant.prepare_model(onnx.load(str(DATA / f"{case}.onnx")))
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for node in model.graph.node:
        if node.domain != "thinker":
            continue
        t = types[node.output[0]]
        want = {"Dequant": TensorProto.FLOAT, "Requant": TensorProto.INT16}.get(node.op_type, TensorProto.INT8)
        assert t.elem_type == want, (node.op_type, t.elem_type)
        assert len(t.shape.dim) > 0 or node.op_type == "iqSum"


def _linger_model(nodes: list[onnx.NodeProto], x_shape: list[int], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12), helper.make_opsetid("thinker", 1)])
    model.ir_version = IR_VERSION
    return model


def test_int8_relu_is_rewritten_and_clip_maxpool_run_in_stock_ort(rng) -> None:
    """Quant -> Relu (default domain, int8) -> MaxPool (int8) -> Clip (int8, ReLU6) -> Dequant."""
    nodes = [
        helper.make_node(
            "Quant",
            ["x"],
            ["q"],
            domain="thinker",
            name="quant",
            data_bits=8,
            scale_x=16.0,
            platform_quant="luna_quant",
        ),
        helper.make_node("Relu", ["q"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["m"], name="pool", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("Clip", ["m", "lo", "hi"], ["c"], name="relu6"),
        helper.make_node("Dequant", ["c"], ["y"], domain="thinker", name="dequant", scale_o=16.0),
    ]
    inits = [
        onnx.numpy_helper.from_array(np.array(0, np.int8), "lo"),
        onnx.numpy_helper.from_array(np.array(96, np.int8), "hi"),
    ]
    model = _linger_model(nodes, [2, 3, 5, 5], inits)
    # Stock onnxruntime refuses the int8 Relu at opset 12 (why the rewrite exists).
    with pytest.raises(Exception, match="Relu"):
        so = ort.SessionOptions()
        ortquant.register(so)
        ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    prepared = ortquant.prepare_model(model)
    assert [n.domain for n in prepared.graph.node if n.op_type == "Relu"] == ["thinker"]
    assert [n.domain for n in model.graph.node if n.op_type == "Relu"] == [""]  # the input model is not changed
    x = (rng.standard_normal((2, 3, 5, 5)) * 4).astype(np.float32)
    (got,) = _session(model).run(None, {"x": x})
    q = ref.relu(ref.quant(x, 16.0, 8))
    qp = np.pad(q, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-128)
    pooled = qp.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5))
    want = ref.dequant(np.clip(pooled, 0, 96).astype(np.int8), 16.0)
    assert_bitexact(got, want)


def test_float_relu_is_left_alone() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = _linger_model(nodes, [3], [])
    assert ortquant.prepare_model(model) is model
    (got,) = _session(model).run(None, {"x": np.array([-1.0, 0.0, 2.0], np.float32)})
    assert_bitexact(got, np.array([0.0, 0.0, 2.0], np.float32))


def test_relu_behind_a_transpose_and_without_types_is_rewritten() -> None:
    # No value_info at all and a Transpose in between: the producer rule finds the int8 source.
    nodes = [
        helper.make_node("Quant", ["x"], ["q"], domain="thinker", data_bits=8, scale_x=4.0),
        helper.make_node("Transpose", ["q"], ["t"], perm=[1, 0]),
        helper.make_node("Relu", ["t"], ["r"]),
        helper.make_node("Dequant", ["r"], ["y"], domain="thinker", scale_o=4.0),
    ]
    model = _linger_model(nodes, [2, 3], [])
    prepared = ortquant.prepare_model(model)
    assert [n.domain for n in prepared.graph.node if n.op_type == "Relu"] == ["thinker"]
    x = np.array([[-1.0, 0.3, 2.0], [0.6, -0.2, 31.0]], np.float32)
    (got,) = _session(model).run(None, {"x": x})
    assert_bitexact(got, ref.dequant(ref.relu(ref.quant(x, 4.0, 8)).T.copy(), 4.0))


def test_requant_chain_types(rng) -> None:
    """Quant -> Requant 8->16 -> iqSigmoid -> Dequant and Quant(16 bit) -> Requant 16->8: the int16 outputs get
    their type from ortquant's type inference."""
    nodes = [
        helper.make_node("Quant", ["x"], ["q"], domain="thinker", data_bits=8, scale_x=32.0),
        helper.make_node(
            "Requant", ["q"], ["r"], domain="thinker", data_bits=8, o_bits=16, scale_x=32.0, scale_o=8192.0
        ),
        helper.make_node("iqSigmoid", ["r"], ["s"], domain="thinker", scale_x=8192.0, scale_o=128.0),
        helper.make_node("Quant", ["x"], ["q16"], domain="thinker", data_bits=16, scale_x=1024.0),
        helper.make_node(
            "Requant", ["q16"], ["r8"], domain="thinker", data_bits=16, o_bits=8, scale_x=1024.0, scale_o=4.0
        ),
        helper.make_node("iqAdd", ["s", "r8"], ["a"], domain="thinker", scale_x=128.0, scale_y=4.0, scale_o=4.0),
        helper.make_node("Dequant", ["a"], ["y"], domain="thinker", scale_o=4.0),
    ]
    model = _linger_model(nodes, [4, 6], [])
    x = (rng.standard_normal((4, 6)) * 8).astype(np.float32)
    (got,) = _session(model).run(None, {"x": x})
    s = ref.iqsigmoid(ref.requant(ref.quant(x, 32.0, 8), 32.0, 8192.0, 16), 8192.0)
    r8 = ref.requant(ref.quant(x, 1024.0, 16), 1024.0, 4.0, 8)
    assert_bitexact(got, ref.dequant(ref.iqadd(s, r8, 128.0, 4.0, 4.0), 4.0))
