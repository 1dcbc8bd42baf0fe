"""Integer mode's transposed convolutions (``transforms/lower_integer.py``, ConvTranspose on the float-exact backend):
Quant -> ConvTranspose(Quant(W)) [-> Relu] runs as QuantCodes -> onnxruntime's ConvTranspose on the integer values
-> Rescale, where float32 adds every product exactly. The expected outputs come from an int64 transposed
convolution written here from ONNX's definition and the integer reference's rescale, independent of the transform
and of onnxruntime; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

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


def _model(c: int, m: int, hw: tuple[int, int], attrs: dict, *, group: int = 1, per_channel: bool = True,
           act_bits: int = 4, w_bits: int = 4, relu: bool = True) -> tuple[onnx.ModelProto, dict]:  # fmt: skip
    rng = np.random.default_rng(c * 10 + m)
    k = attrs.get("kernel_shape", [3, 3])
    p = {
        "w": (rng.standard_normal((c, m // group, *k)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((1, m // group, 1, 1)) * 0.04 if per_channel else np.array(0.02)).astype(np.float32),
        "as": np.float32(0.05),
        "z": np.float32(0),
        "ab": np.float32(act_bits),
        "wb": np.float32(w_bits),
        "cb": (rng.standard_normal(m) * 0.1).astype(np.float32),
    }
    nodes = [
        helper.make_node("Quant", ["x", "as", "z", "ab"], ["xq"], domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "z", "wb"], ["wq"], domain=Q, signed=1, narrow=1),
        helper.make_node("ConvTranspose", ["xq", "wq", "cb"], ["c"], name="deconv", group=group, **attrs),
    ]
    out = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
        out = "y"
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, *hw])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        initializer=[_init(k2, v) for k2, v in p.items()],
    )  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    model.ir_version = 10
    return model, p


def _conv_transpose_int(a: np.ndarray, w: np.ndarray, attrs: dict, group: int) -> np.ndarray:
    """ONNX ConvTranspose (explicit pads) on int64 values: every input pixel adds its products at the strided taps."""
    n, c, h, wd = a.shape
    _, mg, kh, kw = w.shape
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    oph, opw = attrs.get("output_padding", [0, 0])
    full_h, full_w = sh * (h - 1) + (kh - 1) * dh + 1 + oph, sw * (wd - 1) + (kw - 1) * dw + 1 + opw
    full = np.zeros((n, mg * group, full_h, full_w), np.int64)
    cg = c // group
    for gi in range(group):
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,cm->nmhw", a[:, gi * cg : (gi + 1) * cg], w[gi * cg : (gi + 1) * cg, :, i, j])
                full[:, gi * mg : (gi + 1) * mg, i * dh : i * dh + sh * (h - 1) + 1 : sh,
                     j * dw : j * dw + sw * (wd - 1) + 1 : sw] += contrib  # fmt: skip
    return full[:, :, pt : full_h - pb, pl : full_w - pr]


def _want(x: np.ndarray, p: dict, attrs: dict, group: int, relu: bool) -> np.ndarray:
    wy = qref.quant(p["w"], p["ws"], p["z"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    s_w = np.broadcast_to(p["ws"].astype(np.float64), wy.shape)
    codes = np.rint(wy.astype(np.float64) / s_w).astype(np.int64)
    a = iref.act_codes(x, float(p["as"]), 0.0, int(p["ab"]), False)
    acc = _conv_transpose_int(a, codes, attrs, group)
    scale = np.tile(np.broadcast_to(p["ws"].astype(np.float64).reshape(-1), (codes.shape[1],)), group)
    return iref.rescale(acc, np.float64(p["as"]) * scale, p["cb"].astype(np.float64), 1, relu=relu)


CASES = {
    "stride-2-output-padding": (4, 6, (5, 7), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 1),
    "stride-1": (3, 5, (6, 4), {"pads": [1, 0, 1, 2]}, 1),
    "dilated-4x4": (4, 4, (5, 5), {"kernel_shape": [4, 4], "strides": [2, 3], "dilations": [2, 1]}, 1),
    "groups": (4, 6, (4, 6), {"strides": [2, 2]}, 2),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("relu", [True, False])
def test_transposed_convolution_is_the_exact_integer_sum_rescaled(case: str, relu: bool) -> None:
    c, m, hw, attrs, group = CASES[case]
    model, p = _model(c, m, hw, attrs, group=group, relu=relu)
    (d,) = integer_plan(model)
    assert d.integer and "ConvTranspose on integer values (float-exact)" in d.reason, d
    prepared = ortquant.prepare_model(model, integer=True)
    assert [n.op_type for n in prepared.graph.node] == ["QuantCodes", "ConvTranspose", "Rescale"]
    x = (np.random.default_rng(1).standard_normal((2, c, *hw)) * 0.6).astype(np.float32)
    got = ortquant.InferenceSession(model, integer=True).run(None, {"x": x})[0]
    want = _want(x, p, attrs, group, relu)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_sums_float32_cannot_add_exactly_stay_float() -> None:
    """64 channels x 9 taps of 8-bit codes (up to 255) and weight codes of 127: sums up to 1.9e7 > 2^24."""
    model, _ = _model(64, 8, (4, 4), {"strides": [2, 2]}, act_bits=8, w_bits=8)
    w = next(t for t in model.graph.initializer if t.name == "w")
    w.CopyFrom(_init("w", onnx.numpy_helper.to_array(w) * 20))  # codes saturated at +-127
    (d,) = integer_plan(model)
    assert not d.integer and "float32 would not add them exactly" in d.reason, d


def test_the_engine_backend_alone_leaves_it_float(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    model, _ = _model(4, 6, (5, 7), {"strides": [2, 2]})
    (d,) = integer_plan(model)
    assert not d.integer and "float-exact backend only" in d.reason, d


def test_a_scale_per_input_channel_stays_float() -> None:
    """W [C, M, kH, kW] with a scale per input channel (axis 0): not a per-output-channel rescale."""
    model, _ = _model(4, 6, (5, 7), {"strides": [2, 2]})
    ws = next(t for t in model.graph.initializer if t.name == "ws")
    ws.CopyFrom(_init("ws", (0.01 + np.arange(4) * 0.01).reshape(4, 1, 1, 1)))
    (d,) = integer_plan(model)
    assert not d.integer and "varies along another axis than the output channel" in d.reason, d
