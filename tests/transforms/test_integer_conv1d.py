"""Integer mode's 1-D convolutions (``transforms/integer_conv1d.py``): a Conv on [N, C, L] with a [M, C/group, k]
weight runs as the 2-D layer with height 1. The expected output is a direct 1-D integer convolution written here
(int64 sums over the taps, one float64 rescale), independent of the transform and of the 2-D reference."""

from __future__ import annotations

import _integer_fixtures
import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from onnx import TensorProto, helper

import ortquant
from ortquant.reference import integer as iref
from ortquant.reference import qonnx as qref
from ortquant.transforms.lower_integer import integer_plan

Q = "qonnx.custom_op.general"
backend = _integer_fixtures.backend  # the fixture, by this name
Arr = np.ndarray


def _conv1d_int(
    a: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int], dilation: int, group: int
) -> np.ndarray:
    """sum over c, t of a[n, g*C/g + c, o*stride + t*dilation - pads[0]] * w[m, c, t] (0 outside), int64."""
    n, _c, length = a.shape
    m, cg, k = w.shape
    out_len = (length + pads[0] + pads[1] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, m, out_len), np.int64)
    for j in range(m):
        gi = j // (m // group)
        for o in range(out_len):
            for t in range(k):
                pos = o * stride + t * dilation - pads[0]
                if 0 <= pos < length:
                    out[:, j, o] += a[:, gi * cg : (gi + 1) * cg, pos] @ w[j, :, t]
    return out


def _model(opset: int, bn: bool, x_shape: list, group: int = 2) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    p = {
        "w": (rng.standard_normal((6, 4 // group, 3)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((6, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(6),
        "as": np.float32(0.06),
        "az": np.float32(0),
        "ab": np.float32(5),
        "cb": (rng.standard_normal(6) * 0.1).astype(np.float32),
        "gamma": (0.5 + rng.random(6)).astype(np.float32),
        "beta": (rng.standard_normal(6) * 0.2).astype(np.float32),
        "mean": (rng.standard_normal(6) * 0.1).astype(np.float32),
        "var": (0.5 + rng.random(6)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=1),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv1d", strides=[2], pads=[1, 2], dilations=[2],
                         group=group, kernel_shape=[3]),
    ]  # fmt: skip
    last = "c"
    if bn:
        nodes.append(helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"))
        last = "b"
    nodes.append(helper.make_node("Relu", [last], ["y"], name="relu"))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[_init(k, v) for k, v in p.items()],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, p


@pytest.mark.parametrize("opset", [11, 17])  # Unsqueeze / Squeeze take axes as an attribute before opset 13
@pytest.mark.parametrize("bn", [True, False])
def test_conv1d_follows_the_contract(backend, opset, bn):
    m, p = _model(opset, bn, [None, 4, 17])
    (d,) = integer_plan(m)
    assert d.integer and "1-D convolution as 2-D" in d.reason, d
    x = np.random.default_rng(4).standard_normal((3, 4, 17)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    a = iref.act_codes(x, float(p["as"]), 0.0, 5, True)
    acc = _conv1d_int(a, codes, 2, (1, 2), 2, 2)
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64)
    b = p["cb"].astype(np.float64)
    if bn:
        gk = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + np.float64(np.float32(1e-5)))
        s, b = s * gk, (b - p["mean"].astype(np.float64)) * gk + p["beta"].astype(np.float64)
    want = iref.rescale(acc, s, b, 1, relu=True)
    assert got.shape == want.shape == (3, 6, 8)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_conv1d_on_an_input_of_unknown_rank_stays_float():
    m, _ = _model(17, False, None)  # type: ignore[arg-type]
    del m.graph.input[0].type.tensor_type.shape.dim[:]
    m.graph.input[0].type.tensor_type.ClearField("shape")
    (d,) = integer_plan(m)
    assert not d.integer and "the 1-D convolution's input has rank unknown, not 3" in d.reason, d
