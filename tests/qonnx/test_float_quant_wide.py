"""FloatQuant with float64 / int32 / int64 inputs (docs/ops.md, "float64 and int64 parameters").

qonnx's float_quant runs each step in the dtype numpy promotes its operands to (an int array mixed with a float32
one gives float64, like a float64 array): X / scale and |v| + finfo(dtype).tiny in float32 only when X and scale
are float32, the grid 2^e and the rounding in float32 only when M and B are float32 too, the formula max partly in
E's and B's dtype, the clip and the product with the scale in float64; execute_node casts to float32. Every case
here is compared bit for bit with qonnx 1.0.0 (execute_node, or float_quant itself) on the same arrays. The only
elements left out are those where numpy's floor(log2(.)) is not the exact binary exponent (decision 7, computed
independently below); test_exact_exponent_float64 checks what we do there against exact rational arithmetic.
"""

from __future__ import annotations

import itertools
import math
import zlib
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import IR_VERSION, ORT_ERRORS, SPECIAL_F32, assert_bitexact, make_node_model, run_model

if HAVE_QONNX:
    from qonnx.custom_op.general.floatquant import float_quant as qonnx_float_quant

needs_qonnx = pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")

DOMAIN = "qonnx.custom_op.general"
MODES = ["ROUND", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]
F16, F32, F64, I32, I64 = np.float16, np.float32, np.float64, np.int32, np.int64
DBL_MAX = float(np.finfo(F64).max)
# saturation, has_inf, has_nan
OVERFLOWS = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1)]
# qonnx requires these attributes; ortquant gets the same ones
DEFAULT_ATTRS = {"rounding_mode": "ROUND", "has_inf": 0, "has_nan": 0, "has_subnormal": 0, "saturation": 1}

# (exponent bits, mantissa bits, bias, max_val)
FORMATS = [
    (4, 3, 7, 448.0),  # E4M3
    (5, 2, 15, 57344.0),  # E5M2
    (4, 3, 7, 1e30),  # max_val above the formula max (480)
    (2, 1, 1, 6.0),  # E2M1
    (5, 10, 15, 65504.0),  # fp16
    (8, 23, 127, 3.4e38),  # fp32-like: the subnormal step 2^-149
    (8, 0, 127, 1.7e38),  # E8M0
    (3, 2, 160, 1.0),  # huge bias: float32 step 0 below 2^-147, not in float64
    (11, 52, 1023, DBL_MAX),  # fp64-like
    (6, 3, -40, 1e30),  # negative bias: the formula max overflows float32 (2^103 is fine, 2^(2^6+39) is not)
]

# X, scale, exponent_bitwidth, mantissa_bitwidth, exponent_bias, max_val
COMBOS = [
    (F32, F64, F64, F64, F64, F64),  # what the QKeras/hls4ml converter writes
    (F32, F32, F64, F32, F32, F32),  # float64 E alone: only the formula max changes dtype
    (F32, F32, F32, F32, F32, F64),  # float64 max_val alone
    (F32, F32, F32, I64, F32, F32),  # int M: the grid and the rounding go float64, v stays float32
    (F32, F32, F32, F32, F64, F32),  # float64 B alone: likewise
    (F32, F64, F32, F32, F32, F32),  # float64 scale: v and tiny float64, grid float64
    (F64, F32, F32, F32, F32, F32),  # float64 X
    (F64, F64, I64, I64, I64, I64),
    (F32, I64, F32, F32, F32, F32),  # int scale: X / scale is float64
    (F32, F32, I32, I32, I32, I32),  # int32 behaves as int64 in numpy's promotion
    (F32, F32, F32, F64, F32, I64),
]


def _name(combo) -> str:
    return "-".join(np.dtype(d).name for d in combo)


def _arr(value, dtype) -> np.ndarray:
    """value as a 0-d array of dtype; an integer dtype takes the value clamped to its range (max_val 1e30)."""
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        return np.array(int(min(max(value, info.min), info.max)), dtype)
    with np.errstate(over="ignore"):
        return np.array(value, dtype)


def _x(rng: np.random.Generator, dtype, n: int = 400) -> np.ndarray:
    """Random magnitudes over the dtype's range, powers of two and their neighbours, format edges, specials."""
    lo, hi = (-8, 6) if dtype == F32 else (-320, 307)
    x = 10.0 ** rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)
    powers = np.ldexp(1.0, np.arange(-20, 20)).astype(dtype)
    near = np.concatenate([powers, np.nextafter(powers, dtype(0)), np.nextafter(powers, dtype(np.inf))])
    edges = [448, 464, 479.9, 480, 496, 512, 57344, 61440, 6.0, 6.5, 7.0, 65504, 65520, 1.5, 2.5, 0.75, 0.3125]
    tiny = [1e-38, 1e-40, 3e-45, 1.2e-38, 3.4e38]
    if dtype == F64:
        tiny += [DBL_MAX, 5e-324, 1e-310, 2.2250738585072014e-308, 1e300, 1.9375 * 2.0**1023]
    extra = np.array(edges + tiny, F64)
    out = np.concatenate([x, near.astype(F64), extra, -extra, SPECIAL_F32.astype(F64)])
    with np.errstate(over="ignore"):
        return out.astype(dtype)


def _log2_region(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Where numpy's floor(log2(|x / scale| + tiny)), in the dtype numpy computes it, is not the exact binary
    exponent of |x / scale| + tiny (decision 7: ortquant uses the exact one)."""
    with np.errstate(all="ignore"):
        v = x / scale
        a = np.abs(v) + np.finfo(v.dtype).tiny
        _, ex = np.frexp(np.where(np.isfinite(a), a, 1))
        return np.isfinite(a) & (np.floor(np.log2(a)) != ex - 1)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return same & ((np.signbit(got) == np.signbit(want)) | np.isnan(want))


def _qonnx_node(inputs, attrs) -> np.ndarray:
    with np.errstate(all="ignore"):
        want = qonnx_execute(qonnx_node("FloatQuant", 6, **{**DEFAULT_ATTRS, **attrs}), inputs)
    assert want.dtype == F32  # qonnx's execute_node casts the float64 result
    return want


def _check(inputs, attrs, const, threads: int = 1) -> None:
    """ortquant through onnxruntime == qonnx's execute_node, outside the decision-7 region."""
    attrs = {**DEFAULT_ATTRS, **attrs}
    model, feeds = make_node_model("FloatQuant", DOMAIN, inputs, const=const, attrs=attrs)
    got = run_model(model, feeds, threads=threads)[0]
    want = _qonnx_node(inputs, attrs)
    keep = ~np.broadcast_to(_log2_region(inputs[0], inputs[1]), want.shape)
    assert keep.mean() > 0.9  # the region is the values a few ulps below powers of two, nothing more
    assert_bitexact(got[keep], want[keep])


@needs_qonnx
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("combo", COMBOS, ids=_name)
def test_float_quant_wide_matches_qonnx(combo, mode):
    rng = np.random.default_rng(zlib.crc32(repr((_name(combo), mode)).encode()))
    x = _x(rng, combo[0])
    for k, (e, m, b, mv) in enumerate(FORMATS):
        scale = [1.0, 0.37, 0.1, -2.0][k % 4]
        if np.dtype(combo[1]).kind == "i":
            scale = [1, 3, -2, 1][k % 4]
        inputs = [x, _arr(scale, combo[1]), *(_arr(v, d) for v, d in zip((e, m, b, mv), combo[2:], strict=True))]
        for sat, inf, nan in OVERFLOWS:
            attrs = {"rounding_mode": mode, "has_inf": inf, "has_nan": nan, "has_subnormal": 0, "saturation": sat}
            # runtime parameters, and (once per format) constant ones, computed at session creation
            _check(inputs, attrs, const=[False] * 6)
            if sat:
                _check(inputs, attrs, const=[False] + [True] * 5)


@needs_qonnx
@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "HALF_UP"])
@pytest.mark.parametrize("pdtype", [F64, I64, F32])
def test_float64_x_extremes(mode, pdtype):
    """float64 X over the whole float64 range, and formats whose float64 step is subnormal, 0 (e <= -1075) or inf
    (e >= 1024), with scales that push v = X / scale to both ends."""
    rng = np.random.default_rng(zlib.crc32(repr((mode, np.dtype(pdtype).name)).encode()))
    x = _x(rng, F64, 300)
    formats = [(11, 52, 1023, DBL_MAX), (11, 52, 1023, np.inf), (11, 10, 1100, 1e300), (11, 0, -5, np.inf)]
    formats += [(64, 52, 0, np.inf), (5, 2, 1075, 1.0), (11, 52, -100, np.inf), (8, 7, 2000, 1e-300)]
    for (e, m, b, mv), scale in itertools.product(formats, [1.0, 1e-300, 1e300, -3.0, 0.0]):
        inputs = [x, F64(scale), _arr(e, pdtype), _arr(m, pdtype), _arr(b, pdtype), _arr(mv, F64)]
        for sat, inf, nan in OVERFLOWS[:3]:
            attrs = {"rounding_mode": mode, "has_inf": inf, "has_nan": nan, "saturation": sat}
            _check(inputs, attrs, const=[False] * 6)


@needs_qonnx
@pytest.mark.parametrize("combo", [(F32, F64), (F64, F64), (F32, I64)], ids=_name)
def test_per_channel_and_broadcast(combo, rng):
    """Per-channel scale and max_val (with the odd values: NaN, negative, +-0, tiny), parameters of higher rank
    than X, one-element format parameters of higher rank, and several threads over a larger tensor."""
    xd, pd = combo
    n = 4 * 5 * 6 * 7
    full = _x(rng, xd, n)
    x = np.concatenate([full[n:], full[:n]])[:n].reshape(4, 5, 6, 7)  # the special values first
    fd = F64 if pd == I64 else pd
    mv_c = np.array([448.0, np.nan, -1.0, 0.0, -0.0], fd).reshape(1, 5, 1, 1)
    cases = [
        (np.array([0.1, 0.3, 1.0, 2.5, 1 / 3], fd).reshape(1, 5, 1, 1), mv_c),
        (np.array([0.5, 0.25, 4.0, 1.0, 3.0, 7.0, 0.1], fd), np.array([448.0, 0.0, -0.0, 100, 3, 1e30, 1e-3], fd)),
        (np.array(0.37, fd), np.array([[448.0], [-0.0], [0.0], [6.0], [np.nan], [240.0]], fd)),
        (np.array(1.5, fd), np.array(-0.0, fd)),  # one-element max_val -0.0: numpy's other clip rule
        (np.full((2, 1, 1, 1, 1), 0.75, fd), np.array(448.0, fd)),
    ]
    for scale, mv in cases:
        e, m, b = (np.array(v, pd) for v in (4, 3, 7))
        for sat, inf, nan in OVERFLOWS:
            attrs = {"rounding_mode": "ROUND", "has_inf": inf, "has_nan": nan, "saturation": sat}
            for const in (False, True):
                _check([x, scale, e, m, b, mv], attrs, const=[False] + [const] * 5)
    # one-element format parameters of higher rank raise the output rank, as in numpy
    e5 = np.full((1, 1, 1, 1, 1), 4, pd)
    _check([x, np.array(1.0, fd), e5, np.array(3, pd), np.array(7, pd), np.array(448, fd)], {}, const=[False] * 6)
    # a larger tensor on two threads (the element range is split between them)
    big = (rng.standard_normal((8, 16, 32, 32)) * 100).astype(xd)
    s16 = rng.uniform(0.05, 1.0, (1, 16, 1, 1)).astype(fd)
    _check([big, s16, *(np.array(v, pd) for v in (5, 2, 15)), np.array(57344, fd)], {}, [False] * 6, threads=2)


@needs_qonnx
def test_all_constant_node_is_folded_and_exact():
    """All six inputs constant (a float64-parameter weight quantizer): computed once at session creation."""
    x = _x(np.random.default_rng(9), F32, 200)
    inputs = [x, F64(0.3), F64(4), F64(3), F64(7), F64(448)]
    attrs = {**DEFAULT_ATTRS, "rounding_mode": "HALF_DOWN"}
    model, _ = make_node_model("FloatQuant", DOMAIN, inputs, const=True, attrs=attrs)
    sess = ortquant.InferenceSession(model)
    want = _qonnx_node(inputs, {"rounding_mode": "HALF_DOWN"})
    keep = ~_log2_region(x, inputs[1])
    for _ in range(2):
        (got,) = sess.run(None, {})
        assert_bitexact(got[keep], want[keep])


@needs_qonnx
def test_float64_steps_are_really_float64():
    """Each dtype change is visible: the same values as all-float32 inputs give other answers, and each side
    matches qonnx with its own dtypes."""
    # v = X / 0.1 in float64 vs float32 (ROUND near .5 ties of the grid)
    x = np.array([0.35, 0.45, 0.25, 1.05, 12.75, 0.15], F32)
    # float64's tiny (2^-1022) keeps the exponent of values below FLT_MIN: with M = 2, B = 160 a float32 X of
    # 1e-40 has the step 2^-135 in float64, against 2^-128 (from FLT_MIN) in float32, where it rounds to 0
    x_small = np.array([1e-40, -3e-41, 2e-39, 1e-44, 0.0], F32)
    # with M = 30 and B = 127 values below FLT_MIN get e = -126 - 30 = -156 (v and tiny float32): 2^-156 is 0 in
    # float32 (q = 0 * round(v / 0) = NaN) but not in float64, where an int M or a float64 B puts the grid
    cases = [
        (x, [F32(0.1), F32(8), F32(1), F32(7), F32(1e6)], 1),  # scale float64: v float64
        (x_small, [F32(1), F32(8), F32(2), F32(160), F32(1)], 1),  # scale float64: tiny 2^-1022
        (x_small, [F32(1), F32(8), F32(30), F32(127), F32(1)], 3),  # M int64: the grid float64
        (x_small, [F32(1), F32(8), F32(30), F32(127), F32(1)], 4),  # B float64: the grid float64
    ]
    for xs, params, wide_at in cases:
        narrow = [xs, *params]
        wide = list(narrow)
        wide[wide_at] = wide[wide_at].astype(I64 if wide_at == 3 else F64)
        got_n = run_model(*make_node_model("FloatQuant", DOMAIN, narrow))[0]
        got_w = run_model(*make_node_model("FloatQuant", DOMAIN, wide))[0]
        assert_bitexact(got_n, _qonnx_node(narrow, {}))
        assert_bitexact(got_w, _qonnx_node(wide, {}))
        assert not _same(got_n, got_w).all(), wide_at
        if wide_at in (3, 4):
            assert np.isnan(got_n).all() and np.isfinite(got_w).all()


@needs_qonnx
def test_formula_max_dtypes():
    """qonnx's formula max (2 - 2^-M) * 2^(2^E - 1 - B) takes the power in float32 only when E and B are float32.
    E = 8, B = -1: 2^256 is inf in float32 (nothing saturates) but 1.875 * 2^256 in float64, which a float64 X with
    a small scale reaches: the clipped value times 1e-70 is about 2.2e7 instead of float32 overflow."""
    x = np.array([1e100, -1e100, 1e60, 3.0], F64)
    results = {}
    for de, db in itertools.product([F32, F64, I64], repeat=2):
        inputs = [x, F64(1e-70), np.array(8, de), F64(3), np.array(-1, db), F64(np.inf)]
        got = run_model(*make_node_model("FloatQuant", DOMAIN, inputs))[0]
        assert_bitexact(got, _qonnx_node(inputs, {}))
        results[np.dtype(de).name, np.dtype(db).name] = got
    narrow = results.pop(("float32", "float32"))
    assert np.isinf(narrow[:3]).all()
    for got in results.values():
        assert np.isfinite(got).all() and 2e7 < got[0] < 2.3e7
        assert_bitexact(got, results["float64", "float64"])


def _exact_float_quant(v: float, m_bits: int, bias: int, max_val: float, mode: str, coarse: bool = False) -> float:
    """FloatQuant of one value with scale 1 in exact rational arithmetic (|v| in the normal range). coarse=True
    uses the exponent one higher, what numpy's float64 log2 gives just below a power of two."""
    ex = math.frexp(abs(v))[1] - 1 + (1 if coarse else 0)
    step = Fraction(2) ** max(ex - m_bits, 1 - bias - m_bits)
    t = Fraction(v) / step
    rounders = {"FLOOR": math.floor, "CEIL": math.ceil, "DOWN": math.trunc}
    rounders["UP"] = lambda u: math.ceil(u) if u > 0 else math.floor(u)
    q = rounders[mode](t) * step
    return float(min(max(q, -Fraction(max_val)), Fraction(max_val)))


@needs_qonnx
@pytest.mark.parametrize("mode", ["FLOOR", "CEIL", "UP", "DOWN"])
def test_exact_exponent_float64(mode):
    """Decision 7 on the float64 path: values a few float64 ulps below 2^k take the step of [2^(k-1), 2^k);
    numpy's float64 log2 rounds up to k there (for up to ~350 ulps at |k| near 1000), so qonnx's step is twice
    ours. Ours equals exact rational arithmetic, qonnx's the same arithmetic with the coarser step; with M = 20
    both grids are float32 values, so the difference survives the cast wherever the rounding goes toward zero."""
    m_bits, bias, max_val = 20, 1023, DBL_MAX
    ks = [3, 4, 10, 100, -3, -10, -100]
    xs = []
    for k in ks:
        v = 2.0**k
        for _ in range(3):
            v = np.nextafter(v, 0.0)
            xs.append(v)
    x = np.array(xs + [-v for v in xs], F64)
    inputs = [x, F64(1), F64(11), F64(m_bits), F64(bias), F64(max_val)]
    got = run_model(*make_node_model("FloatQuant", DOMAIN, inputs, attrs={"rounding_mode": mode}))[0]
    exact = np.array([_exact_float_quant(float(v), m_bits, bias, max_val, mode) for v in x], F64)
    coarse = np.array([_exact_float_quant(float(v), m_bits, bias, max_val, mode, True) for v in x], F64)
    assert_bitexact(got, exact.astype(F32))
    region = _log2_region(x, F64(1))
    assert region.reshape(2, len(ks), 3)[:, :, 0].all()  # the first value below each 2^k at least
    with np.errstate(all="ignore"):
        want = qonnx_float_quant(x, F64(1), F64(11), F64(m_bits), F64(bias), True, F64(max_val), 0, 0, 0, mode)
    assert want.dtype == F64
    assert_bitexact(want, np.where(region, coarse, exact))
    # rounding away from zero reaches 2^k on either grid; toward zero the coarse grid stops one step lower
    assert (got != want.astype(F32)).any() == (mode != "UP")


# ---- errors -------------------------------------------------------------------------------------------------


def _error(inputs, const, attrs=None) -> str:
    model, feeds = make_node_model("FloatQuant", DOMAIN, inputs, const=const, attrs=attrs)
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    return str(e.value)


@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize(
    "index,value,word",
    [
        (3, F64(3.5), "mantissa_bitwidth"),
        (3, F64(np.nan), "mantissa_bitwidth"),
        (3, I64(53), "mantissa_bitwidth"),
        (3, I64(-1), "mantissa_bitwidth"),
        (2, F64(np.inf), "exponent_bitwidth"),
        (2, I64(65), "exponent_bitwidth"),
        (2, np.array([4, 4], I64), "exponent_bitwidth"),
        (4, I64(2**40), "exponent_bias"),
        (4, F64(-np.inf), "exponent_bias"),
        (4, np.zeros((1, 0), F64), "exponent_bias"),
        (2, I32(-3), "exponent_bitwidth"),
    ],
)
def test_bad_format_parameters(index, value, word, const):
    inputs = [np.ones(3, F32), F64(1), F64(4), F64(3), F64(7), F64(448)]
    inputs[index] = value
    msg = _error(inputs, [False] + [const] * 5)
    assert "floatquant_node" in msg and word in msg, msg
    assert ("integer in" in msg) != ("one element" in msg), msg


@pytest.mark.parametrize(
    "inputs,word",
    [
        ([np.ones(3, F16), F64(1), F32(4), F32(3), F32(7), F32(448)], None),  # float16 X with float64
        ([np.ones(3, F32), F64(1), F16(4), F32(3), F32(7), F32(448)], "exponent_bitwidth"),
        ([np.ones(3, F32), F32(1), F32(4), F32(3), I64(7), F16(448)], "max_val"),
        ([np.ones(3, F32), F32(1), np.uint8(4), F32(3), F32(7), F32(448)], "exponent_bitwidth"),
        ([np.ones(3, F64), np.uint16(1), F32(4), F32(3), F32(7), F32(448)], "scale"),
        ([np.ones(3, I64), F64(1), F64(4), F64(3), F64(7), F64(448)], None),  # X must be a float
    ],
)
@pytest.mark.parametrize("const", [False, True])
def test_refused_dtypes(inputs, word, const):
    msg = _error(inputs, [False] + [const] * 5)
    assert "floatquant_node" in msg, msg
    if word:
        assert word in msg, msg


def test_unbroadcastable_shapes():
    for s, mv in ((np.ones(4, F64), F64(448)), (F64(1), np.ones(2, I64))):
        msg = _error([np.ones((2, 3), F32), s, F64(4), F64(3), F64(7), mv], False)
        assert "floatquant_node" in msg and "broadcast" in msg, msg


def test_saturation_without_inf_or_nan_is_refused():
    msg = _error([np.ones(3, F32), F64(1), F64(4), F64(3), F64(7), F64(448)], True, {"saturation": 0})
    assert "floatquant_node" in msg and "'saturation'" in msg


def test_models_pass_the_checker_and_infer_float32():
    ortquant.register_schemas()
    for types in (
        [
            TensorProto.FLOAT,
            TensorProto.DOUBLE,
            TensorProto.INT64,
            TensorProto.DOUBLE,
            TensorProto.INT32,
            TensorProto.FLOAT,
        ],
        [TensorProto.DOUBLE] * 6,
    ):
        inits = [
            numpy_helper.from_array(np.asarray(4, helper.tensor_dtype_to_np_dtype(t)), f"p{i}")
            for i, t in enumerate(types[1:], 1)
        ]
        node = helper.make_node("FloatQuant", ["x", *(f"p{i}" for i in range(1, 6))], ["y"], domain=DOMAIN)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", types[0], ["N", 8])], [], inits)
        g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8]))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        assert inferred.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
