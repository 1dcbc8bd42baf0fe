"""Integer mode's grid path for activations (``transforms/integer_grid_activation.py``): a layer whose activation is
not produced by a Quant right before it, but lies on a per-tensor integer grid, runs on the integer path with the
codes of that grid. Each expected output is computed here in numpy (int64 sums, one float64 rescale) from the
model's own parameters, independently of the transform."""

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
from ortquant.transforms.lower_integer import integer_plan, lower_integer

Q = "qonnx.custom_op.general"
backend = _integer_fixtures.backend  # the fixture, by this name


def _model(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], x_shape: list, opset: int = 17
) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _weight(shape: tuple[int, ...], axis: int, bits: int = 4) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """A per-output-channel weight quantizer's parameters, its integer codes and float64 scales (numpy)."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal(shape) * 0.2).astype(np.float32)
    s_shape = [1] * len(shape)
    s_shape[axis] = shape[axis]
    ws = (0.01 + rng.random(s_shape) * 0.04).astype(np.float32)
    p = {"w": w, "ws": ws, "wz": np.float32(0), "wb": np.float32(bits)}
    wy = qref.quant(w, ws, p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / ws.astype(np.float64)).astype(np.int64)
    return p, codes, ws.reshape(-1).astype(np.float64)


def _wquant() -> onnx.NodeProto:
    return helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1)


@pytest.mark.parametrize("bits,signed,zeropt", [(4, 1, 0.0), (8, 0, 0.0), (6, 0, 9.0), (8, 1, 0.0)])
def test_channels_last_conv_reads_the_transposed_quantizer_output(backend, bits, signed, zeropt):
    """NHWC x -> Quant -> Transpose to NCHW -> Conv (the channels-last exports): the Transpose keeps the grid."""
    p, codes, s_w = _weight((6, 4, 3, 3), 0)
    s_a = np.float32(0.07)
    b = np.random.default_rng(2).standard_normal(6).astype(np.float32)
    inits = [_init(k, v) for k, v in p.items()]
    inits += [_init("as", s_a), _init("az", zeropt), _init("ab", bits), _init("b", b)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=signed),
        helper.make_node("Transpose", ["xq"], ["xt"], name="to_nchw", perm=[0, 3, 1, 2]),
        _wquant(),
        helper.make_node("Conv", ["xt", "wq", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    m = _model(nodes, inits, [None, 7, 7, 4])
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid 0.07 * (q - " in d.reason, d
    x = np.random.default_rng(3).standard_normal((2, 7, 7, 4)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    a = iref.act_codes(x, float(s_a), zeropt, bits, bool(signed)).transpose(0, 3, 1, 2)
    acc = iref.conv_int(a, codes, (2, 1), (1, 1, 1, 1), (1, 1), 1)
    want = iref.rescale(acc, np.float64(s_a) * s_w, b.astype(np.float64), 1, relu=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_multithreshold_then_a_scale(backend):
    """MultiThreshold (integer counts) -> Mul by a scale -> MatMul: the grid scale * count, q in [0, T]."""
    rng = np.random.default_rng(4)
    thresholds = np.sort(rng.standard_normal((1, 7)), axis=1).astype(np.float32)
    p, codes, s_w = _weight((20, 5), 1)
    inits = [_init(k, v) for k, v in p.items()] + [_init("t", thresholds), _init("k", 0.25)]
    nodes = [
        helper.make_node("MultiThreshold", ["x", "t"], ["c"], name="mt", domain=Q),
        helper.make_node("Mul", ["c", "k"], ["xs"], name="scale"),
        _wquant(),
        helper.make_node("MatMul", ["xs", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [None, 20])
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid 0.25 * (q - 0), q in [0, 7]" in d.reason, d
    x = rng.standard_normal((6, 20)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    count = (x[:, :, None] >= thresholds[None, :, :]).sum(axis=2).astype(np.int64)
    want = iref.rescale(count @ codes, 0.25 * s_w, np.zeros(5), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_half_integer_zero_point_is_bipolar(backend):
    """MultiThreshold with out_bias = -out_scale / 2 gives +-out_scale / 2: bipolar codes on the XNOR kernel."""
    rng = np.random.default_rng(5)
    thresholds = np.zeros((1, 1), np.float32)
    w = np.where(rng.random((32, 4)) < 0.5, -1.0, 1.0).astype(np.float32)
    ws = np.float32(0.125)
    inits = [_init("t", thresholds), _init("w", w), _init("ws", ws)]
    nodes = [
        helper.make_node("MultiThreshold", ["x", "t"], ["xs"], name="mt", domain=Q, out_scale=2.0, out_bias=-1.0),
        helper.make_node("BipolarQuant", ["w", "ws"], ["wq"], name="wquant", domain=Q),
        helper.make_node("MatMul", ["xs", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [None, 32])
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid 2 * (q - 0.5), q in [0, 1]" in d.reason, d
    if backend != "float":  # binary weights fit int8: the engine, on the bit kernel
        assert "XNOR-popcount" in d.reason, d
    x = rng.standard_normal((5, 32)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    a = np.where(x >= 0, 1, -1).astype(np.int64)
    want = iref.rescale(a @ w.astype(np.int64), np.full(4, 0.125), np.zeros(4), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bipolar_quant_through_a_transpose_takes_the_xnor_kernel(monkeypatch):
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    rng = np.random.default_rng(6)
    w = np.where(rng.random((3, 8)) < 0.5, -1.0, 1.0).astype(np.float32)
    inits = [_init("as", 0.5), _init("w", w), _init("ws", 1.0)]
    nodes = [
        helper.make_node("BipolarQuant", ["x", "as"], ["xq"], name="aquant", domain=Q),
        helper.make_node("Transpose", ["xq"], ["xt"], name="tr", perm=[1, 0]),
        helper.make_node("BipolarQuant", ["w", "ws"], ["wq"], name="wquant", domain=Q),
        helper.make_node("MatMul", ["xt", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [3, 5])
    (d,) = integer_plan(m)
    assert d.integer and "XNOR-popcount" in d.reason, d
    x = rng.standard_normal((3, 5)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    a = np.where(x.T >= 0, 1, -1).astype(np.int64)
    want = iref.rescale(a @ w.astype(np.int64), np.full(8, 0.5), np.zeros(8), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_float64_activation_scale_uses_the_exact_scale(backend):
    """A Quant right before the layer with a float64 scale (the fused quantizer takes float32): the layer reads its
    output, recovers q with float32(s), and rescales with the float64 s itself."""
    s_a = 0.0123456789012345678  # not a float32 value
    p, codes, s_w = _weight((10, 3), 1)
    inits = [_init(k, v) for k, v in p.items()]
    inits += [_init("as", s_a, np.float64), _init("az", 0.0), _init("ab", 6.0)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=1),
        _wquant(),
        helper.make_node("MatMul", ["xq", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [None, 10])
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid" in d.reason, d
    rng = np.random.default_rng(8)
    q = rng.integers(-32, 32, (4, 10))
    x = (s_a * (q + rng.uniform(-0.3, 0.3, q.shape))).astype(np.float32)  # away from rounding ties
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = iref.rescale(q @ codes, s_a * s_w, np.zeros(3), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _gemm_after(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], src: str) -> onnx.ModelProto:
    p, _codes, _s = _weight((10, 3), 1)
    inits = inits + [_init(k, v) for k, v in p.items()]
    return _model([*nodes, _wquant(), helper.make_node("MatMul", [src, "wq"], ["y"], name="mm")], inits, [None, 10])


@pytest.mark.parametrize(
    "case,reason",
    [
        (
            "input",
            "the activation is a graph input, not the output of a Quant / BipolarQuant, and is on no integer grid",
        ),
        ("per_channel", "per-channel"),
        ("wide", "needs 20 bits; integer mode reads more than 16 bits only on a power-of-two scale"),
        ("wider", "the activation bit width 26 is not an integer in 1..24"),  # a power-of-two scale: fused path
        ("wide_span", "the 16-bit activation's values q - z in [1, 65536] and 0 span 65537 levels"),
        ("third", "zero point that is not an integer or a half"),
        ("sigmoid", "produced by Sigmoid, not by a Quant / BipolarQuant, and is on no integer grid"),
        ("uint8", "by QuantizeLinear, not by a Quant / BipolarQuant, and the activation is uint8, not float32"),
    ],
)
def test_reasons_when_the_activation_has_no_usable_grid(case, reason):
    bits = {"wide": 20.0, "wider": 26.0, "wide_span": 16.0}.get(case, 4.0)
    scale = 0.125 if case == "wider" else 0.1
    q_inits = [_init("as", scale, np.float64), _init("az", -1.0 if case == "wide_span" else 0.0), _init("ab", bits)]
    signed = 0 if case == "wide_span" else 1
    quant = helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=signed)
    if case == "input":
        m = _gemm_after([], [], "x")
    elif case == "per_channel":
        k = _init("k", np.linspace(0.5, 2.0, 10))
        m = _gemm_after([quant, helper.make_node("Mul", ["xq", "k"], ["xs"], name="scale")], [*q_inits, k], "xs")
    elif case in ("wide", "wider", "wide_span"):
        m = _gemm_after([quant], q_inits, "xq")
    elif case == "third":
        t = _init("t", np.zeros((1, 1)))
        mt = helper.make_node("MultiThreshold", ["x", "t"], ["xs"], name="mt", domain=Q, out_scale=3.0, out_bias=1.0)
        m = _gemm_after([mt], [t], "xs")
    elif case == "uint8":  # on the grid 1 * (q - 0), q in [0, 255], but not a float tensor
        ql = helper.make_node("QuantizeLinear", ["x", "qs", "qz"], ["xs"], name="ql")
        m = _gemm_after([ql], [_init("qs", 0.1), _init("qz", 0, np.uint8)], "xs")
    else:
        m = _gemm_after([quant, helper.make_node("Sigmoid", ["xq"], ["xs"], name="sig")], q_inits, "xs")
    (d,) = integer_plan(m)
    assert not d.integer and reason in d.reason, d
    assert lower_integer(m) is m


@pytest.mark.parametrize("signed,zeropt", [(0, 0.0), (1, 0.0), (0, 700.0)])
def test_16bit_grid_through_a_transpose_runs_on_byte_planes(backend, signed, zeropt):
    """A 16-bit Quant with a float64 scale, then a Transpose (qonnx2mdc's export): the grid path recovers the codes
    with a synthesized 16-bit quantizer, the engine runs two byte planes (the float-exact backend takes the layer
    where its float32 sums are exact: K * max|q - z| * max|w| < 2^24)."""
    s_a = 0.00390625 * 1.5  # float64 value, exact in float32
    k = 40
    p, codes, s_w = _weight((k, 3), 1)
    inits = [_init(n, v) for n, v in p.items()]
    inits += [_init("as", s_a, np.float64), _init("az", zeropt), _init("ab", 16.0)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=signed),
        helper.make_node("Transpose", ["xq"], ["xt"], name="tr", perm=[1, 0]),
        _wquant(),
        helper.make_node("MatMul", ["xt", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [k, 6])
    (d,) = integer_plan(m)
    act_max = max(65535 - zeropt, zeropt) if not signed else 32768
    float_exact = backend == "float" and k * act_max * int(np.abs(codes).max()) < 2**24
    kind = "MatMul on integer values (float-exact)" if float_exact else "QGemm (int8 engine on two byte planes)"
    assert d.integer and d.reason.startswith(f"{kind}; activation on the grid"), d
    rng = np.random.default_rng(12)
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    q = rng.integers(lo, hi + 1, (k, 6))
    q[0, :2] = lo, hi
    x = (s_a * (q - zeropt + rng.uniform(-0.3, 0.3, q.shape))).astype(np.float32)  # away from rounding ties
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = iref.rescale((q.T - int(zeropt)) @ codes, s_a * s_w, np.zeros(3), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_ternary_codes_through_a_transpose_are_not_taken_as_bipolar(monkeypatch):
    """A signed narrow 2-bit Quant gives -s, 0, +s: the grid q in [-1, 1] includes 0, so the layer takes the
    bit-serial kernel (0 stays 0), not XNOR-popcount (which would make 0 a +1)."""
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    rng = np.random.default_rng(9)
    w = np.where(rng.random((6, 4)) < 0.5, -1.0, 1.0).astype(np.float32)
    inits = [_init("as", 0.5), _init("az", 0.0), _init("ab", 2.0), _init("w", w), _init("ws", 1.0)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Transpose", ["xq"], ["xt"], name="tr", perm=[1, 0]),
        helper.make_node("BipolarQuant", ["w", "ws"], ["wq"], name="wquant", domain=Q),
        helper.make_node("MatMul", ["xt", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [6, 5])
    (d,) = integer_plan(m)
    assert d.integer and "bit-serial" in d.reason, d
    x = (rng.standard_normal((6, 5)) * 0.6).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    a = iref.act_codes(x.T, 0.5, 0.0, 2, True, narrow=True)
    assert np.any(a == 0)  # the case this test is about
    want = iref.rescale(a @ w.astype(np.int64), np.full(4, 0.5), np.zeros(4), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "s_type,z_type,b_type",
    [(np.float64, np.int64, np.int64), (np.float32, np.int64, np.int64), (np.float64, np.float64, np.float64),
     (np.float64, np.int32, np.int32)],
)  # fmt: skip
def test_quantizer_with_float64_or_integer_parameters_of_float32_values_is_fused(backend, s_type, z_type, b_type):
    """QKeras' converter writes activation quantizers with a float64 power-of-two scale and int64 zero point 0 and bit
    width: QONNX Quant then divides and rounds in float64, which gives the float32 computation's codes for such
    values (an exact quotient, plus 0). The quantizer goes into the layer (no Quant node left). The reference is
    qonnx's own semantics (``reference.qonnx.quant`` with those parameter types), on inputs that include every code's
    rounding tie and values far out of range."""
    s_a = 2.0**-5
    p, codes, s_w = _weight((12, 3), 1)
    inits = [_init(k, v) for k, v in p.items()]
    inits += [_init("as", s_a, s_type), _init("az", 0, z_type), _init("ab", 6, b_type)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=1),
        _wquant(),
        helper.make_node("MatMul", ["xq", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [None, 12])
    assert "Quant" not in [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]
    ties = (np.arange(-40, 40) + 0.5) * s_a
    x = np.concatenate([ties, np.random.default_rng(5).standard_normal(64) * 2, [1e30, -1e30, 1e-40]])
    x = np.resize(x.astype(np.float32), (12, 12))
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    xq = qref.quant(x, np.asarray(s_a, s_type), np.asarray(0, z_type), np.asarray(6, b_type), signed=True,
                    narrow=False, rounding_mode="ROUND")  # fmt: skip
    q = np.rint(xq.astype(np.float64) / s_a).astype(np.int64)
    want = iref.rescale(q @ codes, s_a * s_w, np.zeros(3), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("scale,zeropt", [(0.1, 0), (2.0**-5, 3)])
def test_quantizer_with_float64_parameters_that_change_its_codes_stays(scale, zeropt):
    """A float64 scale that is not a power of two, or an int64 zero point that is not 0: the float64 computation may
    round otherwise than the fused float32 one, so the Quant stays and the layer reads its output (the grid path)."""
    p, _codes, _s_w = _weight((12, 3), 1)
    inits = [_init(k, v) for k, v in p.items()]
    inits += [_init("as", scale, np.float64), _init("az", zeropt, np.int64), _init("ab", 6, np.int64)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        _wquant(),
        helper.make_node("MatMul", ["xq", "wq"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, [None, 12])
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid" in d.reason, d
    assert "Quant" in [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]


def _per_channel_conv(scales: np.ndarray) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """Quant (4-bit unsigned, one scale per channel of a [1, 4, 5, 6] input) -> 1x1 Conv of the 4 channels to 3
    (per-output-channel weight quantizer): the model, the weight codes [3, 4] and the weight scales."""
    p, codes, s_w = _weight((4, 3), 1)
    inits = [_init(k, v) for k, v in p.items() if k not in ("w", "ws")]
    inits += [_init("w", p["w"].T.reshape(3, 4, 1, 1)), _init("ws", p["ws"].reshape(3, 1, 1, 1))]
    inits += [_init("as", scales.reshape(1, 4, 1, 1).astype(np.float32)), _init("az", 0.0), _init("ab", 4.0)]
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq"], ["y"], name="conv", kernel_shape=[1, 1]),
    ]
    return _model(nodes, inits, [1, 4, 5, 6]), codes.T, s_w


@pytest.mark.parametrize("ratios", [(1, 2, 4, 8), (1, 3, 2, 5), (1, 128, 16, 2)])
def test_per_channel_quant_right_before_a_layer_reads_its_per_tensor_grid(backend, ratios):
    """A Quant with one scale per channel (Brevitas' scaling_per_output_channel activation) right before a layer that
    sums its channels: the fused quantizer takes such scales for depthwise layers only, so the layer reads the
    Quant's output on the grid path, as the per-tensor grid of the finest scale (codes q * s_c / s_min, two byte
    planes past 8 bits)."""
    s0 = 0.0234375  # 3 / 128: every multiple is exact in float32
    scales = np.array(ratios, np.float64) * s0
    m, codes, s_w = _per_channel_conv(scales)
    (d,) = integer_plan(m)
    assert d.integer and "activation on the grid" in d.reason, d
    rng = np.random.default_rng(21)
    q = rng.integers(0, 16, (1, 4, 5, 6))
    q[0, :, 0, 0] = 15
    x = (scales.reshape(1, 4, 1, 1) * (q + rng.uniform(-0.3, 0.3, q.shape))).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    wide = q * np.array(ratios).reshape(1, 4, 1, 1)  # the per-tensor codes on the finest scale
    sums = np.einsum("nchw,mc->nmhw", wide, codes)
    want = iref.rescale(sums.reshape(1, 3, -1), s0 * s_w, np.zeros(3), 1).reshape(1, 3, 5, 6)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_per_channel_quant_whose_scales_are_not_multiples_stays_float():
    m, _codes, _s_w = _per_channel_conv(np.array([0.1, 0.15, 0.2, 0.3]))
    (d,) = integer_plan(m)
    assert not d.integer and "per channel" in d.reason and "integer multiples of the finest one" in d.reason, d
    assert lower_integer(m) is m
