"""Integer mode's residual fusion (``transforms/integer_residual.py``, the QConv op's optional input R): an Add of a
lowered convolution's output and another tensor of the same shape, and the Relu after it, run inside the op. The
expected outputs come from the integer reference (``_integer_fixtures.qconv_reference``) plus a numpy float32
addition, independent of the transform and the op; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, qconv_reference
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_residual import fuse_integer_residual

Q = "qonnx.custom_op.general"


def _params(seed: int, c: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w": (rng.standard_normal((c, c, 3, 3)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((c, 1, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.05),
        "az": np.float32(0),
        "ab": np.float32(4),
        "cb": (rng.standard_normal(c) * 0.1).astype(np.float32),
    }


def _model(
    c: int,
    *,
    relu: bool,
    swap: bool = False,
    two: bool = False,
    residual: str = "xq",
    add_out_also_output: bool = False,
    conv_relu: bool = False,
) -> tuple[onnx.ModelProto, list[dict]]:
    """xq = Quant(x); c1 = Conv(xq) (pads 1) [-> Relu]; [c2 = Conv'(xq)]; s = Add(c1, residual or c2) [-> Relu]."""
    ps = [_params(3, c), _params(4, c)]
    inits = []
    nodes = [helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0)]
    for i, p in enumerate(ps[: 2 if two else 1]):
        sfx = f"_{i}"
        inits += [_init(k + sfx, v) for k, v in p.items()]
        nodes += [
            helper.make_node("Quant", ["w" + sfx, "ws" + sfx, "wz" + sfx, "wb" + sfx], ["wq" + sfx],
                             name="wquant" + sfx, domain=Q, signed=1, narrow=1),
            helper.make_node("Conv", ["xq", "wq" + sfx, "cb" + sfx], ["c" + sfx], name="conv" + sfx, pads=[1] * 4,
                             kernel_shape=[3, 3]),
        ]  # fmt: skip
    inits += [_init(k, ps[0][k]) for k in ("as", "az", "ab")]
    left = "c_0"
    if conv_relu:
        nodes.append(helper.make_node("Relu", ["c_0"], ["r_0"], name="conv_relu"))
        left = "r_0"
    if residual == "bias":  # a broadcast operand: [1, C, 1, 1]
        inits.append(_init("bias", np.linspace(-0.2, 0.2, c).reshape(1, c, 1, 1)))
    right = "c_1" if two else residual
    operands = [right, left] if swap else [left, right]
    nodes.append(helper.make_node("Add", operands, ["s"], name="add"))
    out = "s"
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"], name="relu"))
        out = "y"
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)]
    if add_out_also_output and relu:
        outputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, 9, 10])],
                          outputs, initializer=inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, ps


def _quantized_x(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    from ortquant.reference import qonnx as qref

    return qref.quant(x, p["as"], p["az"], p["ab"], signed=False, narrow=False, rounding_mode="ROUND")


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("swap", [False, True])
def test_residual_add_and_relu_match_the_reference(relu, swap):
    m, (p, _) = _model(8, relu=relu, swap=swap)
    prepared = ortquant.prepare_model(m, integer=True)
    ops = [n.op_type for n in prepared.graph.node]
    assert "Add" not in ops and "Relu" not in ops, ops
    conv = next(n for n in prepared.graph.node if n.op_type == "QConv")
    assert len(conv.input) == 5 and conv.input[4] == "xq"
    x = np.random.default_rng(5).standard_normal((3, 8, 9, 10)).astype(np.float32) * 0.5
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    s = qconv_reference(x, p, [3, 3], relu=False) + _quantized_x(x, p)
    want = np.maximum(s, np.float32(0)) if relu else s
    np.testing.assert_array_equal(got, want)


def test_two_convolutions_the_later_takes_the_other_as_residual():
    m, (p0, p1) = _model(4, relu=True, two=True)
    prepared = ortquant.prepare_model(m, integer=True)
    convs = [n for n in prepared.graph.node if n.op_type == "QConv"]
    assert [len(c.input) for c in convs] == [4, 5] and "Add" not in [n.op_type for n in prepared.graph.node]
    x = np.random.default_rng(6).standard_normal((2, 4, 9, 10)).astype(np.float32) * 0.5
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = np.maximum(qconv_reference(x, p0, [3, 3], relu=False) + qconv_reference(x, p1, [3, 3], relu=False), 0)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_the_relu_stays_when_the_sum_is_also_a_graph_output():
    m, _ = _model(4, relu=True, add_out_also_output=True)
    prepared = ortquant.prepare_model(m, integer=True)
    ops = [n.op_type for n in prepared.graph.node]
    assert "Add" not in ops and ops.count("Relu") == 1, ops


@pytest.mark.parametrize("case", [{"residual": "bias"}, {"conv_relu": True}])
def test_other_adds_stay_as_they_are(case):
    # (A constant bias Add is folded into the layer's B by the step before, integer_bias_add.py: without that step
    # this rule must leave it.)
    m, _ = _model(4, relu=True, **case)
    prepared = prepared_without(m, "fuse_integer_bias_add")
    assert "Add" in [n.op_type for n in prepared.graph.node]
    assert fuse_integer_residual(prepared) is prepared


def test_a_residual_of_another_shape_is_a_clear_error():
    m, _ = _model(4, relu=True)
    prepared = ortquant.prepare_model(m, integer=True)
    conv = next(n for n in prepared.graph.node if n.op_type == "QConv")
    conv.input[4] = "r"
    prepared.graph.input.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    sess = ortquant.InferenceSession(prepared)
    x, r = np.zeros((1, 4, 9, 10), np.float32), np.zeros((1, 4, 9, 11), np.float32)
    match = r"input R \(the residual added to the output\) has shape \(1, 4, 9, 11\), the output.s is \(1, 4, 9, 10\)"
    with pytest.raises(Exception, match=match):
        sess.run(None, {"x": x, "r": r})
