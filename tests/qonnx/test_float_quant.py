"""QONNX FloatQuant: C++ (through onnxruntime and through ortquant._C on every ISA) vs the numpy reference, and vs
qonnx itself, which we match everywhere except where decision 7 says (the exact exponent)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import ortquant
from conftest import SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx_elementwise as ref
from ortquant.reference.qonnx import ROUNDING_MODES

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
MODES = list(ROUNDING_MODES)
QONNX_MODES = ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
F32 = np.float32
FLT_MAX = float(np.finfo(F32).max)

# (name, exponent bits, mantissa bits, bias, max_val)
FORMATS = [
    ("E4M3", 4, 3, 7, 448.0),
    ("E5M2", 5, 2, 15, 57344.0),
    ("E4M3-formula-max", 4, 3, 7, 1e30),  # max_val above the formula max (480)
    ("E2M1", 2, 1, 1, 6.0),
    ("E3M2", 3, 2, 3, 28.0),
    ("E2M3", 2, 3, 1, 7.5),
    ("E4M3-bias10", 4, 3, 10, 56.0),
    ("fp16", 5, 10, 15, 65504.0),
    ("bf16", 8, 7, 127, 3.3895314e38),
    ("fp32-like", 8, 23, 127, FLT_MAX),  # subnormal step 2^-149
    ("E8M0", 8, 0, 127, 1.7014118e38),
    ("E1M1", 1, 1, 0, 3.0),
    ("huge-bias", 3, 2, 160, 1.0),  # step below 2^-149: s rounds to 0
]
OVERFLOWS = [(True, False, False), (False, True, False), (False, False, True), (False, True, True)]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _inputs(rng: np.random.Generator, n: int = 600) -> np.ndarray:
    mags = 10.0 ** rng.uniform(-8, 6, n)
    x = (mags * rng.choice([-1.0, 1.0], n)).astype(F32)
    powers = np.ldexp(F32(1), np.arange(-20, 20)).astype(F32)
    near = np.concatenate([powers, np.nextafter(powers, F32(0)), np.nextafter(powers, F32(np.inf))])
    extra = np.array(
        [
            448,
            464,
            479.9,
            480,
            496,
            512,
            57344,
            61440,
            6.0,
            6.5,
            7.0,
            1e-38,
            -1e-40,
            3e-45,
            FLT_MAX,
            -FLT_MAX,
            65504,
            65520,
            1.5,
            2.5,
            0.75,
            0.3125,
        ],
        F32,
    )
    return np.concatenate([x, SPECIAL_F32, near, -near, extra, -extra]).astype(F32)


def _fmt(name: str):
    for f in FORMATS:
        if f[0] == name:
            return f
    raise KeyError(name)


def _args(fmt, scale=None, max_val=None):
    _, e, m, b, mv = fmt
    scale = F32(1) if scale is None else scale
    return scale, F32(e), F32(m), F32(b), F32(mv) if max_val is None else max_val


@pytest.mark.parametrize("mode", MODES)
def test_kernels_match_reference(isa, mode, rng):
    x = _inputs(rng)
    for fmt, (sat, inf, nan), scale in itertools.product(FORMATS, OVERFLOWS, [F32(1), F32(0.37), F32(-2)]):
        args = _args(fmt, scale)
        got = kernels.float_quant(x, *args, rounding_mode=mode, has_inf=inf, has_nan=nan, saturation=sat)
        want = ref.float_quant(x, *args, rounding_mode=mode, has_inf=inf, has_nan=nan, saturation=sat)
        assert_bitexact(got, want)


def test_odd_parameters_match_reference(isa, rng):
    x = _inputs(rng)
    for max_val, scale in itertools.product([np.nan, -1.0, 0.0, -0.0, np.inf, 1e-40], [1.0, 0.0, -0.0, np.inf]):
        for sat, inf, nan in OVERFLOWS:
            args = _args(_fmt("E4M3"), F32(scale), F32(max_val))
            got = kernels.float_quant(x, *args, has_inf=inf, has_nan=nan, saturation=sat)
            assert_bitexact(got, ref.float_quant(x, *args, has_inf=inf, has_nan=nan, saturation=sat))


@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "UP"])
def test_kernels_per_channel_and_broadcast(isa, mode, rng):
    x = _inputs(rng, 3 * 4 * 5 * 6 - 190)[: 3 * 4 * 5 * 6].reshape(3, 4, 5, 6)
    cases = [
        ((1, 4, 1, 1), (1, 4, 1, 1)),  # per-channel activation
        ((3, 1, 1, 1), ()),  # per-output-channel weight
        ((6,), (5, 1)),  # innermost parameters vary
        ((1, 1, 5, 6), (1,)),
        ((2, 3, 4, 5, 6), ()),  # parameters of higher rank than x
    ]
    for s_shape, m_shape in cases:
        s = rng.uniform(0.01, 2, s_shape).astype(F32)
        mv = rng.choice([448.0, 100.0, 3.0], m_shape).astype(F32)
        for sat, inf, nan in OVERFLOWS:
            got = kernels.float_quant(x, s, F32(4), F32(3), F32(7), mv, mode, inf, nan, sat)
            assert_bitexact(got, ref.float_quant(x, s, F32(4), F32(3), F32(7), mv, mode, inf, nan, sat))
    # one-element format parameters of higher rank raise the output rank, as in numpy
    e = np.full((1, 1, 1, 1, 1), 4, F32)
    got = kernels.float_quant(x, F32(1), e, F32(3), F32(7), F32(448))
    assert got.shape == (1, 3, 4, 5, 6)
    assert_bitexact(got, ref.float_quant(x, F32(1), e, F32(3), F32(7), F32(448)))
    # x broadcast along the innermost dimension
    x1 = np.array([[-3.3], [0.0], [700.0]], F32)
    s = rng.uniform(0.1, 2, (3, 40)).astype(F32)
    assert_bitexact(
        kernels.float_quant(x1, s, F32(4), F32(3), F32(7), F32(448), mode),
        ref.float_quant(x1, s, F32(4), F32(3), F32(7), F32(448), mode),
    )


def test_fp8_grids():
    """E4M3 and E5M2 give the OCP FP8 value sets (saturating at 448 and 57344)."""

    def grid(e_bits: int, m_bits: int, bias: int, max_val: float) -> np.ndarray:
        vals = {0.0}
        for ex in range(2**e_bits):
            for mant in range(2**m_bits):
                if ex == 0:
                    v = mant / 2**m_bits * 2.0 ** (1 - bias)
                else:
                    v = (1 + mant / 2**m_bits) * 2.0 ** (ex - bias)
                if v <= max_val:
                    vals.add(v)
        return np.array(sorted(vals), F32)

    for e_bits, m_bits, bias, max_val in ((4, 3, 7, 448.0), (5, 2, 15, 57344.0)):
        g = grid(e_bits, m_bits, bias, max_val)
        # every grid value maps to itself, with either sign
        got = kernels.float_quant(np.concatenate([g, -g]), F32(1), F32(e_bits), F32(m_bits), F32(bias), F32(max_val))
        assert_bitexact(got, np.concatenate([g, -g]))
        # midpoints between neighbours: ROUND ties to the even mantissa, all results on the grid
        mid = ((g[1:].astype(np.float64) + g[:-1]) / 2).astype(F32)
        got = kernels.float_quant(mid, F32(1), F32(e_bits), F32(m_bits), F32(bias), F32(max_val))
        assert np.isin(got, g).all()
        assert g.max() == max_val
        big = kernels.float_quant(np.array([1e9, -1e9], F32), F32(1), F32(e_bits), F32(m_bits), F32(bias), F32(max_val))
        assert_bitexact(big, np.array([max_val, -max_val], F32))


def test_special_inputs():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30], F32)
    e4m3 = _args(_fmt("E4M3"))
    assert_bitexact(kernels.float_quant(x, *e4m3), np.array([np.nan] * 3 + [0.0, -0.0, 448, -448], F32))
    assert_bitexact(
        kernels.float_quant(x, *e4m3, has_inf=True, saturation=False),
        np.array([np.nan] * 3 + [0.0, -0.0, np.inf, -np.inf], F32),
    )
    assert_bitexact(
        kernels.float_quant(x, *e4m3, has_nan=True, saturation=False),
        np.array([np.nan] * 3 + [0.0, -0.0, np.nan, np.nan], F32),
    )


# ---- through onnxruntime -----------------------------------------------------------------------------------


def _node_inputs(rng, fmt="E4M3"):
    x = _inputs(rng)[:480].reshape(2, 3, 80)
    s = rng.uniform(0.05, 1.0, (1, 3, 1)).astype(F32)
    return [x, *_args(_fmt(fmt), s)]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize("fmt", ["E4M3", "E5M2"])
def test_ort_matches_reference(domain, const, fmt, rng):
    inputs = _node_inputs(rng, fmt)
    attrs = {"rounding_mode": "round", "has_inf": 0, "has_nan": 1, "has_subnormal": 1, "saturation": 0}
    (y,) = run_node("FloatQuant", domain, inputs, const=[const] + [True] * 5, attrs=attrs)
    assert_bitexact(y, ref.float_quant(*inputs, "ROUND", False, True, False))


def test_ort_runtime_parameters_and_threads(rng):
    x = (rng.standard_normal((4, 64, 32, 32)) * 100).astype(F32)
    s = rng.uniform(0.05, 1.0, (1, 64, 1, 1)).astype(F32)
    inputs = [x, s, F32(5), F32(2), F32(15), F32(57344)]
    for threads in (1, 2):
        (y,) = run_node("FloatQuant", DOMAINS[0], inputs, threads=threads, attrs={"rounding_mode": "FLOOR"})
        assert_bitexact(y, ref.float_quant(*inputs, "FLOOR"))


def test_missing_attributes_use_qonnx_defaults(rng):
    """qonnx requires has_inf/has_nan/has_subnormal/saturation; ortquant uses their schema defaults 0/0/0/1."""
    inputs = _node_inputs(rng)
    (y,) = run_node("FloatQuant", DOMAINS[0], inputs)
    assert_bitexact(y, ref.float_quant(*inputs, "ROUND", False, False, True))


def test_constant_node_is_folded_and_exact(rng):
    """All-constant FloatQuant (an FP8 weight quantizer) is computed once at session creation (decision 18)."""
    inputs = _node_inputs(rng)
    model, _ = make_node_model("FloatQuant", DOMAINS[0], inputs, const=True, attrs={"rounding_mode": "HALF_UP"})
    sess = ortquant.InferenceSession(model)
    for _ in range(3):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.float_quant(*inputs, "HALF_UP"))


def test_zero_and_negative_scale_follow_qonnx():
    x = np.array([-1.0, 0.0, -0.0, 1.0, 2.0, 1000.0, np.inf], F32)
    for s in (F32(0.0), F32(-0.0), F32(-0.5)):
        inputs = [x, *_args(_fmt("E4M3"), s)]
        (y,) = run_node("FloatQuant", DOMAINS[0], inputs)
        assert_bitexact(y, ref.float_quant(*inputs))
        if qonnx_float_quant is not None:
            with np.errstate(all="ignore"):
                want = np.asarray(qonnx_float_quant(x, s, F32(4), F32(3), F32(7), True, F32(448))).astype(F32)
            assert_bitexact(y, want)


# ---- bad input ---------------------------------------------------------------------------------------------


def _model(attrs=None, inputs=None, const=False):
    inputs = inputs or [np.ones(3, F32), F32(1), F32(4), F32(3), F32(7), F32(448)]
    return make_node_model("FloatQuant", DOMAINS[0], inputs, attrs=attrs, const=[False] + [const] * (len(inputs) - 1))


def _creation_error(attrs) -> str:
    model, _ = _model(attrs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    return str(e.value)


def _run_error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_saturation_without_inf_or_nan_fails_at_session_creation():
    msg = _creation_error({"saturation": 0})
    assert "floatquant_node" in msg and "'saturation'" in msg and "has_inf" in msg


@pytest.mark.parametrize(
    "attrs,word",
    [
        ({"rounding_mode": "SIDEWAYS"}, "rounding_mode"),
        ({"rounding_mode": 1}, "rounding_mode"),
        ({"has_inf": 2}, "'has_inf'"),
        ({"has_nan": -1}, "'has_nan'"),
        ({"has_subnormal": 5}, "'has_subnormal'"),
        ({"saturation": "yes"}, "'saturation'"),
    ],
)
def test_bad_attributes(attrs, word):
    msg = _creation_error(attrs)
    assert "floatquant_node" in msg and word in msg


@pytest.mark.parametrize("const", [False, True])
def test_bad_format_parameters(const):
    x = np.ones(3, F32)
    cases = [
        ([x, F32(1), F32(4), F32(3.5), F32(7), F32(448)], "mantissa_bitwidth"),
        ([x, F32(1), F32(4), F32(53), F32(7), F32(448)], "mantissa_bitwidth"),
        ([x, F32(1), F32(-1), F32(3), F32(7), F32(448)], "exponent_bitwidth"),
        ([x, F32(1), np.array([4, 4], F32), F32(3), F32(7), F32(448)], "exponent_bitwidth"),
        ([x, F32(1), F32(4), F32(3), F32(np.nan), F32(448)], "exponent_bias"),
        ([x, F32(1), F32(4), F32(3), np.zeros((1, 0), F32), F32(448)], "exponent_bias"),
    ]
    for inputs, word in cases:
        msg = _run_error(_model(inputs=inputs, const=const))
        assert "floatquant_node" in msg and word in msg, msg


def test_wrong_dtype_is_refused():
    """float64, int32 and int64 inputs are accepted (test_float_quant_wide.py); these are not."""
    for i, bad, word in (
        (0, np.ones(3, np.int64), "in0"),  # onnxruntime's type error names the graph input
        (2, np.uint8(4), "exponent_bitwidth"),
        (5, np.float16(448), "max_val"),  # float16 parameters need a float16 X and all five float16
    ):
        inputs = [np.ones(3, F32), F32(1), F32(4), F32(3), F32(7), F32(448)]
        inputs[i] = bad
        msg = _run_error(_model(inputs=inputs))
        assert "floatquant_node" in msg and word in msg, msg


def test_unbroadcastable_shapes():
    for s, mv in ((np.ones(4, F32), F32(448)), (F32(1), np.ones(2, F32))):
        msg = _run_error(_model(inputs=[np.ones((2, 3), F32), s, F32(4), F32(3), F32(7), mv]))
        assert "floatquant_node" in msg and "broadcast" in msg


def test_wrong_input_count():
    msg = _run_error(_model(inputs=[np.ones(3, F32), F32(1), F32(4), F32(3), F32(7)]))
    assert "floatquant_node" in msg and "input size" in msg


# ---- against qonnx -----------------------------------------------------------------------------------------

try:
    from qonnx.custom_op.general.floatquant import float_quant as qonnx_float_quant
    from qonnx.custom_op.registry import getCustomOp
except Exception:  # pragma: no cover - qonnx not installed
    qonnx_float_quant = None

needs_qonnx = pytest.mark.skipif(qonnx_float_quant is None, reason="qonnx not installed")


def _qonnx(x, scale, e, m, b, max_val, mode="ROUND", has_inf=False, has_nan=False, saturation=True):
    with np.errstate(all="ignore"):
        return np.asarray(
            qonnx_float_quant(x, scale, e, m, b, True, max_val, has_inf, has_nan, True, mode, saturation)
        ).astype(F32)


def _log2_region(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Where numpy's float32 floor(log2(|x/scale| + tiny)) is not the exact binary exponent (decision 7)."""
    with np.errstate(all="ignore"):
        a = (np.abs((x / scale).astype(F32)) + ref.TINY).astype(F32)
        _, ex = np.frexp(np.where(np.isfinite(a), a, F32(1)))
        return np.isfinite(a) & (np.floor(np.log2(a)) != ex - 1)


@needs_qonnx
@pytest.mark.parametrize("mode", QONNX_MODES)
def test_against_qonnx_differs_only_where_decision_7_says(mode, rng):
    x = _inputs(rng)
    for fmt, (sat, inf, nan), scale in itertools.product(FORMATS, OVERFLOWS, [F32(1), F32(0.37)]):
        args = _args(fmt, scale)
        got = kernels.float_quant(x, *args, rounding_mode=mode, has_inf=inf, has_nan=nan, saturation=sat)
        want = _qonnx(x, *args, mode, inf, nan, sat)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        same &= (np.signbit(got) == np.signbit(want)) | np.isnan(want)
        region = _log2_region(x, scale)
        assert not (~same & ~region).any(), (fmt[0], x[~same & ~region][:5])
        if mode.upper() not in ("FLOOR", "CEIL", "UP", "DOWN") and 1 <= fmt[2] < 17:
            # the nearest modes agree even there for 1 <= M < 17 (with M = 0 qonnx's step for values just below
            # 2^128 is 2^128 = inf, which gives NaN)
            assert same.all(), (fmt[0], x[~same][:5])


@needs_qonnx
def test_against_qonnx_special_and_per_channel(rng):
    x = _inputs(rng)[:600].reshape(4, 150)
    s = rng.uniform(0.01, 2, (4, 1)).astype(F32)
    mv = np.array([448, 100, 3, 1e30], F32).reshape(4, 1)
    for sat, inf, nan in OVERFLOWS:
        got = kernels.float_quant(x, s, F32(4), F32(3), F32(7), mv, "ROUND", inf, nan, sat)
        assert_bitexact(got, _qonnx(x, s, F32(4), F32(3), F32(7), mv, "ROUND", inf, nan, sat))
    xs = _inputs(rng)
    for max_val, scale in itertools.product([np.nan, -1.0, 0.0, np.inf, 1e-40], [1.0, 0.0, -0.0, np.inf]):
        for sat, inf, nan in OVERFLOWS:
            args = _args(_fmt("E4M3"), F32(scale), F32(max_val))
            got = kernels.float_quant(xs, *args, has_inf=inf, has_nan=nan, saturation=sat)
            want = _qonnx(xs, *args, "ROUND", inf, nan, sat)
            mask = ~_log2_region(xs, F32(scale))
            assert_bitexact(got[mask], want[mask])


@needs_qonnx
@pytest.mark.parametrize("max_val", [0.0, -0.0])
def test_zero_formula_max_ties_with_signed_zero_max_val(isa, max_val):
    """A bias so large that 2^(2^E - 1 - B) underflows makes qonnx's formula max +0; np.minimum(+0, max_val)
    returns max_val on the tie, so max_val = -0.0 flips the sign of every clipped zero."""
    x = np.array([1.0, -1.0, 0.0, -0.0, 0.5, 3.0, -7.0], F32)
    args = (F32(1), F32(3), F32(2), F32(160), F32(max_val))
    want = _qonnx(x, *args)
    assert np.signbit(want[0]) == np.signbit(F32(max_val))  # the tie really decides the sign
    assert_bitexact(kernels.float_quant(x, *args), want)
    (got,) = run_node("FloatQuant", DOMAINS[0], [x, *args])
    assert_bitexact(got, want)


@needs_qonnx
@pytest.mark.parametrize("x_dtype", [F32, np.float16])
def test_signed_zero_max_val_of_several_elements(isa, x_dtype):
    """np.clip has two signed-zero rules: with one-element bounds a value equal to a bound keeps its sign, with
    larger bounds it takes the bound's. So a per-channel max_val of +-0 turns every value but NaN into that zero
    (times the scale), a one-element one keeps the sign of a zero q. Also for the all-float16 form."""
    x = np.array([1.0, -1.0, 0.0, -0.0, 0.5, -3.0, np.nan, np.inf, 1e-3], x_dtype)
    x = np.tile(x, (4, 1))
    p_dtype = F32 if x_dtype == F32 else np.float16
    for mv in (
        np.array([[0.0], [-0.0], [448.0], [-1.0]], p_dtype),
        np.array([0.0, -0.0, 448.0, -0.0, 0.0, 6.0, -0.0, 0.0, 0.0], p_dtype),
        np.array([-0.0], p_dtype),
    ):
        for scale in (p_dtype(1), p_dtype(-0.5), np.array([[1.0], [-2.0], [0.0], [np.inf]], p_dtype)):
            args = (scale, p_dtype(4), p_dtype(3), p_dtype(7), mv)
            for sat, inf, nan in OVERFLOWS:
                want = _qonnx(x, *args, "ROUND", inf, nan, sat)
                got = kernels.float_quant(x, *args, has_inf=inf, has_nan=nan, saturation=sat)
                assert_bitexact(got, want)
                attrs = {"has_inf": int(inf), "has_nan": int(nan), "saturation": int(sat)}
                (y,) = run_node("FloatQuant", DOMAINS[0], [x, *args], const=[False] + [True] * 5, attrs=attrs)
                assert_bitexact(y, want)


@needs_qonnx
def test_against_qonnx_execute_node(rng):
    inputs = _node_inputs(rng, "E5M2")
    attrs = {"rounding_mode": "Half_Even", "has_inf": 1, "has_nan": 0, "has_subnormal": 1, "saturation": 0}
    model, feeds = make_node_model("FloatQuant", DOMAINS[0], inputs, attrs=attrs)
    node = model.graph.node[0]
    ctx = {f"in{i}": np.asarray(a) for i, a in enumerate(inputs)}
    with np.errstate(all="ignore"):
        getCustomOp(node).execute_node(ctx, model.graph)
    (got,) = run_model(model, feeds)
    mask = ~_log2_region(inputs[0], inputs[1])
    assert_bitexact(got[mask], ctx[node.output[0]][mask])


def _exact_float_quant(v: float, m_bits: int, bias: int, max_val: float, mode: str, coarse: bool = False) -> float:
    """FloatQuant of one value with scale 1 in exact rational arithmetic (|v| well inside the normal range).
    coarse=True uses the exponent one higher (what qonnx's float32 log2 gives just below a power of two)."""
    fv = Fraction(v)
    ex = math.frexp(abs(v))[1] - 1 + (1 if coarse else 0)  # exact floor(log2|v|)
    e = max(ex - m_bits, 1 - bias - m_bits)
    step = Fraction(2) ** e
    t = fv / step
    r = {
        "FLOOR": math.floor,
        "CEIL": math.ceil,
        "DOWN": math.trunc,
        "UP": lambda u: math.ceil(u) if u > 0 else math.floor(u),
    }[mode](t)
    q = r * step
    return float(min(max(q, -Fraction(max_val)), Fraction(max_val)))


@needs_qonnx
@pytest.mark.parametrize("mode", ["FLOOR", "CEIL", "UP", "DOWN"])
@pytest.mark.parametrize("fmt", ["E4M3", "E5M2", "fp16", "E3M2"])
def test_exact_exponent_just_below_powers_of_two(mode, fmt):
    """Decision 7: values a few ulps below 2^k take the step of [2^(k-1), 2^k), not the coarser step qonnx's
    float32 log2 picks for them. Our result equals exact rational arithmetic; qonnx's differs there whenever the
    rounding goes toward zero."""
    _, e_bits, m_bits, bias, max_val = _fmt(fmt)
    xs = []
    for k in range(3, 12):
        v = F32(2.0**k)
        for _ in range(3):
            v = np.nextafter(v, F32(0))
            xs.append(v)
    x = np.array(xs + [-v for v in xs], F32)
    want = np.array([_exact_float_quant(float(v), m_bits, bias, max_val, mode) for v in x], F32)
    args = (F32(1), F32(e_bits), F32(m_bits), F32(bias), F32(max_val))
    for isa_name in ISAS:
        kernels.set_isa(isa_name)
        try:
            assert_bitexact(kernels.float_quant(x, *args, rounding_mode=mode), want)
        finally:
            kernels.set_isa("")
    (got,) = run_node("FloatQuant", DOMAINS[0], [x, *args], attrs={"rounding_mode": mode})
    assert_bitexact(got, want)
    q = _qonnx(x, *args, mode)
    region = _log2_region(x, F32(1))
    assert region.any()
    # qonnx = the same exact arithmetic with the coarser step inside that region
    coarse = np.array([_exact_float_quant(float(v), m_bits, bias, max_val, mode, True) for v in x], F32)
    assert_bitexact(q, np.where(region, coarse, want))
    # which changes the result where the rounding goes toward zero (FLOOR on positive values, CEIL on negative
    # ones, DOWN on both) unless both clip; rounding away from zero reaches 2^k on either grid
    differs = region & (coarse != want)
    assert differs.any() == (mode != "UP")
