"""The ortquant.integer ops on malformed nodes: an onnxruntime error naming the node and the problem, never a crash;
and each op through onnxruntime against the numpy reference."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from conftest import ORT_ERRORS, make_node_model, run_model
from ortquant import kernels
from ortquant.reference import integer as ref

D = "ortquant.integer"
ACT = {"act_scale": 0.05, "act_bits": 4, "act_signed": 0}


def _conv_inputs(rng: np.random.Generator, m: int = 4) -> list[np.ndarray]:
    return [
        rng.standard_normal((1, 3, 6, 6)).astype(np.float32),
        rng.integers(-7, 8, (m, 3, 3, 3)).astype(np.int8),
        np.full(m, 1e-3),
        np.zeros(m),
    ]


def test_qconv_through_onnxruntime_matches_reference():
    ins = _conv_inputs(np.random.default_rng(0))
    model, feeds = make_node_model("QConv", D, ins, const=[False, True, True, True], attrs={**ACT, "pads": [1] * 4})
    (y,) = run_model(model, feeds)
    want = ref.qconv(*ins, pads=(1, 1, 1, 1), scale=0.05, bits=4, signed=False)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


def test_quant_codes_and_rescale_through_onnxruntime():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 5)) * 0.5).astype(np.float32)
    model, feeds = make_node_model("QuantCodes", D, [x], attrs=ACT)
    (codes,) = run_model(model, feeds)
    np.testing.assert_array_equal(codes, ref.act_codes(x, 0.05, bits=4, signed=False).astype(np.float32))
    acc = rng.integers(-1000, 1000, (2, 3, 5)).astype(np.float32)
    s, b = rng.random(3) * 1e-3, rng.standard_normal(3)
    model, feeds = make_node_model("Rescale", D, [acc, s, b], const=[False, True, True], attrs={"axis": 1, "relu": 1})
    (y,) = run_model(model, feeds)
    np.testing.assert_array_equal(y, ref.rescale(acc.astype(np.int64), s, b, 1, relu=True))


@pytest.mark.parametrize("xnor", [1, 0])
def test_1bit_qconv_and_qgemm_through_onnxruntime_on_both_paths(xnor):
    """A 1-bit layer (bipolar activation, weight codes +-1) on XNOR-popcount (xnor=1) and on the int8 engine
    (xnor=0), through onnxruntime with two intra-op threads (the bit kernels split their rows into pool tasks):
    both equal the reference."""
    rng = np.random.default_rng(4)
    bip = {"act_scale": 0.5, "act_bipolar": 1, "xnor": xnor}
    x = rng.standard_normal((2, 6, 9, 7)).astype(np.float32)
    w = np.where(rng.random((8, 3, 3, 3)) < 0.5, -1, 1).astype(np.int8)
    s, b = rng.random(8) * 1e-2, rng.standard_normal(8)
    attrs = {**bip, "pads": [1, 0, 2, 1], "group": 2, "strides": [2, 1]}
    model, feeds = make_node_model("QConv", D, [x, w, s, b], const=[False, True, True, True], attrs=attrs)
    (y,) = run_model(model, feeds, threads=2)
    want = ref.qconv(x, w, s, b, pads=(1, 0, 2, 1), group=2, strides=(2, 1), scale=0.5, bipolar=True)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))
    xg = rng.standard_normal((40, 70)).astype(np.float32)
    wg = np.where(rng.random((9, 70)) < 0.5, -1, 1).astype(np.int8)
    model, feeds = make_node_model("QGemm", D, [xg, wg, s[:1].repeat(9), b[:1].repeat(9)],
                                   const=[False, True, True, True], attrs=bip)  # fmt: skip
    (y,) = run_model(model, feeds, threads=2)
    want = ref.qgemm(xg, wg, s[:1].repeat(9), b[:1].repeat(9), scale=0.5, bipolar=True)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("op", ["QConv", "QGemm"])
def test_wide_activation_through_onnxruntime_matches_reference(op):
    """16-bit unsigned activations (two byte planes on the engine) through onnxruntime with two intra-op threads."""
    rng = np.random.default_rng(8)
    act = {"act_scale": 2.0**-8, "act_bits": 16, "act_signed": 0, "act_zeropt": 7.0}
    if op == "QConv":
        x = (rng.random((2, 6, 9, 7)) * 270 - 5).astype(np.float32)  # codes over [0, 65535] and clamped beyond
        w = rng.integers(-8, 8, (8, 3, 3, 3)).astype(np.int8)
        attrs = {**act, "pads": [1, 0, 2, 1], "group": 2, "strides": [2, 1]}
    else:
        x = (rng.random((40, 1568)) * 270 - 5).astype(np.float32)
        w = rng.integers(-128, 128, (10, 1568)).astype(np.int8)
        attrs = act
    n = w.shape[0]
    s, b = rng.random(n) * 2.0**-12, rng.standard_normal(n)
    model, feeds = make_node_model(op, D, [x, w, s, b], const=[False, True, True, True], attrs=attrs)
    (y,) = run_model(model, feeds, threads=2)
    a = {"scale": 2.0**-8, "bits": 16, "signed": False, "zeropt": 7.0}
    if op == "QConv":
        want = ref.qconv(x, w, s, b, pads=(1, 0, 2, 1), group=2, strides=(2, 1), **a)
    else:
        want = ref.qgemm(x, w, s, b, **a)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "change,message",
    [
        ({"attrs": {"act_bits": 25}}, "bit width must be 1 .. 24"),
        ({"attrs": {"act_bits": 24, "act_zeropt": -3.0}}, "span 16777219 levels"),
        ({"attrs": {"act_bits": 16, "act_zeropt": -3.0}}, "span 65539 levels"),
        ({"attrs": {"act_scale": -1.0}}, "scale must be finite and positive"),
        ({"attrs": {"act_rounding_mode": "NEAREST"}}, "unknown rounding mode"),
        ({"attrs": {"group": 2}}, "group"),
        ({"s_len": 3}, "one per output channel"),
        ({"w_runtime": True}, "must be a constant initializer"),
        ({"attrs": {"kernel_shape": [2, 2]}}, "kernel_shape"),
        ({"attrs": {"xnor": 2}}, "attribute 'xnor' must be 0 or 1"),
    ],
)
def test_malformed_qconv_is_an_error_naming_the_node(change, message):
    ins = _conv_inputs(np.random.default_rng(2))
    if "s_len" in change:
        ins[2] = np.ones(change["s_len"])
    const = [False, not change.get("w_runtime", False), True, True]
    model, feeds = make_node_model("QConv", D, ins, const=const, attrs={**ACT, **change.get("attrs", {})})
    with pytest.raises(ORT_ERRORS, match=message) as e:
        run_model(model, feeds)
    assert "qconv_node" in str(e.value)


@pytest.mark.parametrize("op", ["QConv", "QGemm", "QConv-channels-last", "QConv-residual", "QConv-codes"])
def test_shifted_weights_through_onnxruntime_match_reference(op):
    """w_shift (weight codes W + w_shift[j], uint8 weights with per-channel zero points) through onnxruntime with two
    intra-op threads: a grouped convolution with an asymmetric activation (its padding code is not 0), with a
    channels-last output, a residual input or output codes, and a QGemm."""
    op, _, form = op.partition("-")
    rng = np.random.default_rng(12)
    act = {"act_scale": 0.05, "act_bits": 8, "act_signed": 0, "act_zeropt": 130.0}
    m = 8
    z = rng.integers(0, 256, m)
    if op == "QConv":
        x = rng.standard_normal((2, 6, 9, 7)).astype(np.float32)
        codes = rng.integers(0, 256, (m, 3, 3, 3)) - z.reshape(-1, 1, 1, 1)
        attrs = {"pads": [1, 0, 2, 1], "group": 2, "strides": [2, 1]}
    else:
        x = rng.standard_normal((5, 70)).astype(np.float32)
        codes = rng.integers(0, 256, (m, 70)) - z.reshape(-1, 1)
        attrs = {}
    shift = codes.reshape(m, -1).max(axis=1) - 127
    stored = (codes - shift.reshape((-1,) + (1,) * (codes.ndim - 1))).astype(np.int8)
    s, b = rng.random(m) * 1e-4, rng.standard_normal(m)
    kw = {"scale": 0.05, "bits": 8, "signed": False, "zeropt": 130.0}
    want = (
        ref.qconv(x, codes, s, b, pads=(1, 0, 2, 1), group=2, strides=(2, 1), **kw)
        if op == "QConv"
        else ref.qgemm(x, codes, s, b, **kw)
    )
    ins, const, out_types = [x, stored, s, b], [False, True, True, True], None
    attrs = {**act, **attrs, "w_shift": [int(v) for v in shift]}
    if form == "channels":
        attrs["channels_last"] = 1
        want = want.transpose(0, 2, 3, 1)
    if form == "residual":
        r = rng.standard_normal(want.shape).astype(np.float32)
        ins, const = [*ins, r], [*const, False]
        want = (want + r).astype(np.float32)
    if form == "codes":
        # 8-bit signed codes: stored as q - z (offset 0), ties and saturation included
        scale = float(np.float32(np.abs(want).max() / 100))
        attrs.update({"out_act_scale": scale, "out_act_bits": 8, "out_act_signed": 1})
        out_types = [onnx.TensorProto.INT8]
        op = "QConvCodes"
        want = ref.act_codes(want, scale, bits=8, signed=True).astype(np.int8)
        assert len(np.unique(want)) > 50
    model, feeds = make_node_model(op, D, ins, const=const, attrs=attrs, output_dtypes=out_types)
    (y,) = run_model(model, feeds, threads=2)
    assert y.dtype == want.dtype and y.shape == want.shape
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("op", ["QConv", "QGemm"])
@pytest.mark.parametrize(
    ("shift", "act", "message"),
    [
        ([1, 2], {}, "'w_shift' must have one value per output channel \\(4\\), got 2"),
        ([1, 2, 3, 70000], {}, "value 70000 is outside \\[-65536, 65536\\]"),
        ([65536] * 4, {}, "output channel 0: the weights w \\+ w_shift sum to more than 2\\^24"),
        ([1, 0, 0, 0], {"act_bits": 12}, "w_shift takes an activation quantizer of at most 8 bits"),
    ],
)
def test_malformed_w_shift_is_refused_naming_the_node(op, shift, act, message):
    x = np.zeros((1, 64, 4, 4) if op == "QConv" else (2, 576), np.float32)
    w = np.ones((4, 64, 3, 3) if op == "QConv" else (4, 576), np.int8)
    model, feeds = make_node_model(op, D, [x, w, np.ones(4), np.zeros(4)], const=[False, True, True, True],
                                   attrs={**ACT, **act, "w_shift": shift})  # fmt: skip
    with pytest.raises(ORT_ERRORS, match=message) as e:
        run_model(model, feeds)
    assert f"{op.lower()}_node" in str(e.value)


def test_qconv_input_channel_mismatch_is_a_run_time_error():
    ins = _conv_inputs(np.random.default_rng(3))
    ins[0] = np.zeros((1, 5, 6, 6), np.float32)
    model, feeds = make_node_model("QConv", D, ins, const=[False, True, True, True], attrs=ACT)
    with pytest.raises(ORT_ERRORS, match="qconv_node"):
        run_model(model, feeds)


def test_qgemm_feature_mismatch_is_an_error():
    w = np.zeros((4, 8), np.int8)
    ins = [np.zeros((2, 7), np.float32), w, np.ones(4), np.zeros(4)]
    model, feeds = make_node_model("QGemm", D, ins, const=[False, True, True, True], attrs=ACT)
    with pytest.raises(ORT_ERRORS, match="7 features"):
        run_model(model, feeds)


@pytest.mark.parametrize(
    ("op", "x", "attrs", "message"),
    [
        ("QGemm", np.zeros((2, 8), np.int32), {}, "float32 values or int8 codes"),
        ("QGemm", np.zeros((2, 8), np.int8), {"act_bits": 12}, "12 bits .9 to 24 bits have no int8 codes"),
        ("QGemmCodes", np.zeros((2, 8), np.float32), {}, "QGemmCodes needs the attributes 'out_act_"),
        ("QGemmCodes", np.zeros((2, 8), np.float32), {"out_act_scale": 0.1, "out_act_bits": 12}, "at most 8 bits"),
        ("QGemm", np.zeros((2, 8), np.float32), {"out_act_scale": 0.1}, "belongs to QGemmCodes"),
    ],
)
def test_qgemm_codes_errors_name_the_problem(op, x, attrs, message):
    w = np.ones((4, 8), np.int8)
    out = [onnx.TensorProto.INT8 if op == "QGemmCodes" else onnx.TensorProto.FLOAT]
    model, feeds = make_node_model(op, D, [x, w, np.ones(4), np.zeros(4)], const=[False, True, True, True],
                                   attrs={**ACT, **attrs}, output_dtypes=out)  # fmt: skip
    with pytest.raises(ORT_ERRORS, match=message):
        run_model(model, feeds)


def test_qconv_without_output_channels_before_a_pool_names_the_node():
    """A weight with 0 output channels, the QConv feeding a MaxPool (fuzz find: onnxruntime's NCHWc rewrite of the
    pool failed first, in its own ReorderOutput node, when the op inferred 0 channels): the error is ours and
    names the QConv."""
    import onnx
    from onnx import helper

    ins = _conv_inputs(np.random.default_rng(5), m=4)
    ins[1] = np.zeros((0, 3, 3, 3), np.int8)
    ins[2], ins[3] = np.ones(0), np.zeros(0)
    model, feeds = make_node_model("QConv", D, ins, const=[False, True, True, True], attrs={**ACT, "pads": [1] * 4})
    g = model.graph
    conv_out = g.output[0].name
    g.node.append(helper.make_node("MaxPool", [conv_out], ["pooled"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, None))
    with pytest.raises(ORT_ERRORS, match="no output channel") as e:
        run_model(model, feeds)
    assert "qconv_node" in str(e.value)


@pytest.mark.parametrize("op", ["QConv", "QGemm", "QuantCodes"])
def test_act_check_takes_values_on_the_grid_and_names_the_declaration_otherwise(op):
    """act_check (a grid a graph input's declared type promises): values within 0.01 of a step of the quantizer's
    grid give the same output as without the check; a value further off, or a code outside the quantizer's range,
    is an error naming the value and the declaration instead of a rounded (or clamped) code."""
    rng = np.random.default_rng(11)
    act = {"act_scale": 0.5, "act_zeropt": 2.0, "act_bits": 4, "act_signed": 0}  # values 0.5 * (q - 2), q in [0, 15]
    declared = "input 'pixels' (finn_datatype UINT4)"
    codes = rng.integers(0, 16, (1, 3, 5, 5))
    x = (0.5 * (codes - 2)).astype(np.float32)
    w = rng.integers(-7, 8, (4, 3, 3, 3)).astype(np.int8)
    s, b = rng.random(4) * 1e-2, rng.standard_normal(4)
    if op == "QConv":
        ins, const = [x, w, s, b], [False, True, True, True]
    elif op == "QGemm":
        x = x.reshape(15, 5)
        ins, const = [x, w.reshape(4, 27)[:, :5].copy(), s, b], [False, True, True, True]
    else:
        ins, const = [x], [False]
    plain, feeds = make_node_model(op, D, ins, const=const, attrs=act)
    checked, _ = make_node_model(op, D, ins, const=const, attrs={**act, "act_check": declared})
    (want,) = run_model(plain, feeds)
    near = dict(feeds)
    key = next(iter(feeds))
    near[key] = feeds[key].copy()
    near[key].flat[[0, 7]] += np.float32([0.004, -0.004])  # 0.008 of a step: still the code
    (got,) = run_model(checked, near)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    for bad, shown in ((0.5 * 0.3, "at flat index 7"), (0.5 * 20, "at flat index 7")):  # off a step; above q = 15
        off = dict(feeds)
        off[key] = feeds[key].copy()
        off[key].flat[7] = np.float32(bad)
        with pytest.raises(ORT_ERRORS, match=r"(?s)input X holds .*" + shown + r".*q an integer in \[0, 15\].*"
                           r"declares input 'pixels' \(finn_datatype UINT4\)"):  # fmt: skip
            run_model(checked, off)
        (unchecked,) = run_model(plain, off)  # without the check the op rounds (or clamps): no error
        assert unchecked.shape == want.shape


def test_act_check_of_a_bipolar_quantizer():
    """With act_bipolar the grid is {-s, s}: +-s (within 0.01 of a step) pass, 0 or 0.5 s is an error."""
    rng = np.random.default_rng(12)
    act = {"act_scale": 0.5, "act_bipolar": 1, "xnor": 0, "act_check": "input 'x' (finn_datatype BIPOLAR)"}
    x = np.where(rng.random((6, 16)) < 0.5, -0.5, 0.5).astype(np.float32)
    w = rng.integers(-3, 4, (5, 16)).astype(np.int8)
    s, b = rng.random(5) * 1e-2, rng.standard_normal(5)
    model, feeds = make_node_model("QGemm", D, [x, w, s, b], const=[False, True, True, True], attrs=act)
    (y,) = run_model(model, feeds)
    want = ref.qgemm(x, w, s, b, scale=0.5, bipolar=True)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))
    for bad in (0.0, 0.25):
        off = {k: v.copy() for k, v in feeds.items()}
        next(iter(off.values())).flat[5] = bad
        with pytest.raises(ORT_ERRORS, match="at flat index 5"):
            run_model(model, off)


@pytest.mark.parametrize(
    ("attrs", "shape", "message"),
    [
        ({"kernel_shape": [4, 4], "strides": [4, 4]}, (1, 2, 3, 8), "smaller than the window 4 x 4"),
        ({"kernel_shape": [0, 2]}, (1, 2, 4, 4), "kernel_shape"),
        ({"kernel_shape": [2, 2], "strides": [1]}, (1, 2, 4, 4), "strides"),
        ({"kernel_shape": [2, 2], "act_bits": 12}, (1, 2, 4, 4), "at most 8 bits"),
        ({"global": 1}, (1, 2, 4), "4-D"),
    ],
)
def test_avgpool_codes_errors_name_the_problem(attrs, shape, message):
    x = np.zeros(shape, np.int8)
    model, feeds = make_node_model("AvgPoolCodes", D, [x], attrs={"act_scale": 0.5, **attrs})
    with pytest.raises(ORT_ERRORS, match=message):
        run_model(model, feeds)


_AVGPOOL_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from conftest import make_node_model, run_model
rng = np.random.default_rng(13)
for scale, bits, signed, offset in ((0.25, 4, 0, 0), (0.0371, 8, 1, 0), (0.0371, 8, 0, 128)):
    a = rng.integers(-128 if signed else 0, 128 if signed else 2**bits, (2, 3, 7, 37))  # q - z
    codes = (a - offset).astype(np.int8)
    v = a.astype(np.float64) * np.float64(np.float32(scale))  # the quantizer's real values
    act = {"act_scale": scale, "act_bits": bits, "act_signed": signed}
    model, feeds = make_node_model("AvgPoolCodes", "ortquant.integer", [codes],
                                   attrs={**act, "kernel_shape": [3, 2], "strides": [2, 3]})
    (y,) = run_model(model, feeds)
    want = np.zeros((2, 3, 3, 12))
    for i in range(3):
        for j in range(12):
            want[:, :, i, j] = v[:, :, 2 * i : 2 * i + 3, 3 * j : 3 * j + 2].sum(axis=(2, 3)) / 6
    assert np.array_equal(y, want.astype(np.float32)), (scale, np.abs(y - want).max())
    model, feeds = make_node_model("AvgPoolCodes", "ortquant.integer", [codes], attrs={**act, "global": 1})
    (y,) = run_model(model, feeds)
    assert np.array_equal(y, (v.sum(axis=(2, 3), keepdims=True) / (7 * 37)).astype(np.float32)), scale
print("ok")
"""


@pytest.mark.parametrize("isa", kernels.supported_isas())
def test_avgpool_codes_through_onnxruntime_on_every_path(isa):
    """The exact mean of the quantizer's real values s * (q - z) over each window, float64 then float32, against
    numpy, with the op library on each ISA path (ORTQUANT_ISA in a fresh process: the column sums are per ISA)."""
    env = {**os.environ, "ORTQUANT_ISA": isa}
    run = subprocess.run([sys.executable, "-c", _AVGPOOL_SCRIPT, str(Path(__file__).resolve().parents[1])],
                         capture_output=True, text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(3, 9, 16), (2, 96, 80)])
def test_qconv_channel_scales_quantize_each_channel_with_its_own(threads, shape):
    """act_channel_scales (a depthwise layer reading a per-channel quantizer): channel c of X is quantized with
    scale c, then the layer is the usual depthwise QConv; against the numpy reference channel by channel, through
    onnxruntime, 16-pixel rows (the vector loops), stride 2, a multiplier of 2 outputs per channel; the larger X is
    quantized in two pool tasks of planes."""
    rng = np.random.default_rng(11)
    c, mult = 5, 2
    scales = np.array([0.02, 0.05, 0.011, 0.3, 0.07], np.float32)
    x = (rng.standard_normal((shape[0], c, *shape[1:])) * 0.4).astype(np.float32)
    w = rng.integers(-7, 8, (c * mult, 1, 3, 3)).astype(np.int8)
    s, b = rng.random(c * mult) * 1e-2, rng.standard_normal(c * mult)
    attrs = {"act_scale": 1.0, "act_bits": 4, "act_signed": 0, "act_channel_scales": scales.tolist(),
             "group": c, "pads": [1, 1, 1, 1], "strides": [2, 1], "relu": 1}  # fmt: skip
    model, feeds = make_node_model("QConv", D, [x, w, s, b], const=[False, True, True, True], attrs=attrs)
    (y,) = run_model(model, feeds, threads=threads)
    codes = np.stack([ref.act_codes(x[:, i], float(scales[i]), bits=4, signed=False) for i in range(c)], axis=1)
    acc = ref.conv_int(codes, w, (2, 1), (1, 1, 1, 1), (1, 1), c)
    np.testing.assert_array_equal(y.view(np.uint32), ref.rescale(acc, s, b, 1, relu=True).view(np.uint32))
    # the per-tensor act_scale alone would give other codes: the attribute is not ignored
    one = ref.qconv(x, w, s, b, strides=(2, 1), pads=(1, 1, 1, 1), group=c, relu=True, scale=1.0, bits=4,
                    signed=False)  # fmt: skip
    assert not np.array_equal(y, one)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"act_channel_scales": [0.1] * 4}, "one scale per input channel (5), got 4"),
        ({"act_channel_scales": [0.1, 0.1, -1.0, 0.1, 0.1]}, "is not finite and positive"),
        ({"act_channel_scales": [0.1] * 5, "act_bits": 12}, "at most 8 bits, not bipolar"),
        ({"act_channel_scales": [0.1] * 5, "act_bipolar": 1}, "at most 8 bits, not bipolar"),
        ({"act_channel_scales": [0.1] * 5, "group": 1}, "takes a depthwise layer"),
    ],
)
def test_malformed_channel_scales_are_refused_naming_the_node(change, message):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 5, 6, 6)).astype(np.float32)
    group = change.get("group", 5)
    w = rng.integers(-7, 8, (5, 5 // group, 3, 3)).astype(np.int8)
    attrs = {"act_scale": 1.0, "act_bits": 4, "act_signed": 0, "group": 5, **change}
    model, feeds = make_node_model("QConv", D, [x, w, np.ones(5), np.zeros(5)], const=[False, True, True, True],
                                   attrs=attrs)  # fmt: skip
    with pytest.raises(ORT_ERRORS, match=re.escape(message)) as e:
        run_model(model, feeds)
    assert "qconv_node" in str(e.value)


def test_channel_scales_refuse_an_input_of_other_channels():
    rng = np.random.default_rng(13)
    w = rng.integers(-7, 8, (4, 1, 3, 3)).astype(np.int8)
    attrs = {"act_scale": 1.0, "act_bits": 4, "group": 4, "act_channel_scales": [0.1] * 4}
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    model, feeds = make_node_model("QConv", D, [x, w, np.ones(4), np.zeros(4)], const=[False, True, True, True],
                                   attrs=attrs)  # fmt: skip
    run_model(model, feeds)  # 4 channels: fine
    model.graph.input[0].type.tensor_type.shape.Clear()
    with pytest.raises(ORT_ERRORS, match="channels"):
        run_model(model, {model.graph.input[0].name: rng.standard_normal((1, 3, 6, 6)).astype(np.float32)})
