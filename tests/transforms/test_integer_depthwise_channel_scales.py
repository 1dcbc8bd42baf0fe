"""lower_integer: a depthwise Conv reading an activation quantizer with one scale per channel (Brevitas'
``scaling_per_output_channel``, MobileNet-v1's block) is lowered with ``act_channel_scales``: each output channel
sums one input channel's codes, so its rescale is that channel's activation scale times its weight scale. Checked
against an independent numpy computation of the contract (docs/ops.md "Integer mode") from the QONNX parameters;
convolutions that sum several channels of such an activation stay float."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant.reference import integer as iref
from ortquant.reference import qonnx as qref
from ortquant.transforms.lower_integer import integer_plan, lower_integer

Q = "qonnx.custom_op.general"
C = 6


def _model(group: int = C, mult: int = 1, scale_shape: tuple[int, ...] = (1, C, 1, 1), bits: float = 4.0):
    """x [N, 6, 10, 10] -> Quant(per-channel scale, unsigned) -> Conv(3x3, pad 1, group) <- Quant(W, per output
    channel) -> Relu."""
    rng = np.random.default_rng(3)
    m = C * mult if group == C else C
    p = {
        "as": (0.02 + rng.random(scale_shape) * 0.1).astype(np.float32),
        "az": np.float32(0),
        "ab": np.float32(bits),
        "w": (rng.standard_normal((m, C // group, 3, 3)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((m, 1, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
    }
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="act_q", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="w_q", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq"], ["c"], name="dw", group=group, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", C, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in p.items()],
    )  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 1)])
    model.ir_version = 10
    return model, p


@pytest.mark.parametrize("mult", [1, 2])
def test_depthwise_layer_with_channel_scales_follows_the_contract(monkeypatch, mult):
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "auto")
    model, p = _model(mult=mult)
    (d,) = integer_plan(model)
    assert d.integer and "per-channel activation scales" in d.reason, d
    (node,) = [n for n in lower_integer(model).graph.node if n.op_type == "QConv"]
    scales = next(a.floats for a in node.attribute if a.name == "act_channel_scales")
    np.testing.assert_array_equal(np.float32(scales), p["as"].ravel())

    x = (np.random.default_rng(4).standard_normal((3, C, 10, 10)) * 0.3).astype(np.float32)
    got = ortquant.InferenceSession(model, integer=True).run(None, {"x": x})[0]
    # the contract from the QONNX parameters: per-channel codes, exact sums, S[j] = s_act[j // mult] * s_w[j]
    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    w_codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    s_act = p["as"].ravel().astype(np.float64)
    codes = np.stack([iref.act_codes(x[:, c], float(s_act[c]), bits=4, signed=False) for c in range(C)], axis=1)
    acc = iref.conv_int(codes, w_codes, (1, 1), (1, 1, 1, 1), (1, 1), C)
    s = np.repeat(s_act, mult) * p["ws"].ravel().astype(np.float64)
    want = iref.rescale(acc, s, np.zeros(C * mult), 1, relu=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # and close to the float path (the same quantized network in float32 arithmetic)
    exact = ortquant.InferenceSession(model, exact=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"group": 1}, "per channel, which the fused quantizer takes for a depthwise layer only"),  # sums channels
        ({"group": 3}, "per channel, which the fused quantizer takes for a depthwise layer only"),  # two per group
        ({"bits": 12.0}, "more than 8 bits"),
        ({"scale_shape": (C, 1, 1)}, None),  # rank 3, broadcast to [1, C, 1, 1]: lowered
        ({"scale_shape": (1, 1, 10, 1)}, "not per-tensor"),  # one scale per row: not per channel
    ],
)
def test_which_per_channel_activations_a_layer_takes(kwargs, reason):
    model, _ = _model(**kwargs)
    (d,) = integer_plan(model)
    if reason is None:
        assert d.integer, d
    else:
        assert not d.integer and reason in d.reason, d
