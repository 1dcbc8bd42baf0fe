"""float16 inputs of the QONNX elementwise quantizers (Quant/IntQuant, BipolarQuant, Trunc/TruncQuant, FloatQuant).

The C++ (through ortquant._C on every ISA, and through onnxruntime) against the numpy reference, and against qonnx
1.0.0 fed the same float16 arrays, without tolerance. qonnx computes these ops with numpy on whatever dtypes it
gets: each float16 step is numpy's (the float32 operation rounded to float16), and Quant and FloatQuant cast their
result to float32 while BipolarQuant and Trunc return numpy's dtype. The dtype rules are in docs/ops.md.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import IR_VERSION, ORT_ERRORS, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx as ref_quant
from ortquant.reference import qonnx_elementwise as ref

if HAVE_QONNX:
    from qonnx.custom_op.general.floatquant import float_quant as qonnx_float_quant
    from qonnx.custom_op.general.intquant import int_quant as qonnx_int_quant
    from qonnx.custom_op.general.trunc import trunc_v1 as qonnx_trunc_v1
    from qonnx.custom_op.general.trunc import trunc_v2 as qonnx_trunc_v2

needs_qonnx = pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")

F16 = np.float16
F32 = np.float32
DOMAIN = "qonnx.custom_op.general"
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
MODES = ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]
FLOAT16 = TensorProto.FLOAT16

# float16 values that exercise numpy's float16 steps: ties, the largest value below 0.5 (HALF_UP of it is 1 in
# float16: 0.5 - 2^-12 + 0.5 ties to 1.0), integers above 1024 where |x| +- 0.5 ties to even, 2048+ (spacing 2),
# the largest finite value, infinities, NaN, zeros, subnormals and the smallest normal.
SPECIAL_F16 = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.5 - 2.0**-12,
        -(0.5 - 2.0**-12),
        1.5 - 2.0**-10,
        1023.5,
        -1023.5,
        1025.0,
        -1025.0,
        1026.0,
        2047.0,
        2050.0,
        -4094.0,
        127.5,
        -128.5,
        255.5,
        65504.0,
        -65504.0,
        32768.0,
        2.0**-24,
        -(2.0**-24),
        3 * 2.0**-24,
        2.0**-14,
        2.0**-14 - 2.0**-24,
        1e-3,
    ],
    dtype=F16,
)


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _x16(rng: np.random.Generator, n: int = 300, mag: float = 60.0) -> np.ndarray:
    x = (rng.standard_normal(n) * mag).astype(F16)
    x[: SPECIAL_F16.size] = SPECIAL_F16
    return x


def _dt(dtype: type) -> str:
    return np.dtype(dtype).name


def _run(op: str, inputs: list, *, const=False, attrs=None, out=TensorProto.FLOAT, threads: int = 1, opset: int = 1):
    (y,) = run_node(
        op, DOMAIN, inputs, const=const, attrs=attrs or {}, output_dtypes=[out], threads=threads, opset=opset
    )
    return y


def _load_error(op: str, inputs: list, const=False, attrs=None, opset: int = 1, out=TensorProto.FLOAT) -> str:
    """The error onnxruntime raises at session creation or at the first run."""
    model, feeds = make_node_model(op, DOMAIN, inputs, const=const, attrs=attrs or {}, opset=opset, output_dtypes=[out])
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    return str(e.value)


# ---- Quant / IntQuant ---------------------------------------------------------------------------------------

QUANT_DTYPES = list(itertools.product([F16, F32], repeat=3))  # X, scale, zeropt
QUANT_BITWIDTHS = [
    *(F16(b) for b in (1, 2, 4, 8, 11, 12, 16, 17, 2.5)),
    *(F32(b) for b in (1, 2, 4, 8, 12, 16, 17, 24, 2.5)),
    *(np.int32(b) for b in (1, 2, 4, 8, 12, 16, 24)),
]
QUANT_PARAMS = [(0.37, 0.0), (0.5, 0.0), (1.0, 0.0), (3.0, 2.0), (2.0**-10, 0.0), (1000.0, 1.0)]


def _quant_params(dts: tuple, scale: float, zp: float, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(scale, dts[1]), np.asarray(zp if signed else abs(zp) + 3, dts[2])


@pytest.mark.parametrize("dts", QUANT_DTYPES, ids=lambda d: "-".join(_dt(t) for t in d))
def test_quant_kernels_match_reference_every_isa(dts, rng):
    """Every dtype combination x rounding mode x signed/narrow x bit width (float16, float32, int32) x scales that
    tie, overflow float16 (x / 2^-10) or go subnormal (x / 1000), on every ISA."""
    x = _x16(rng).astype(dts[0])
    for mode, (signed, narrow), b, (sc, zp) in itertools.product(
        MODES, itertools.product([True, False], repeat=2), QUANT_BITWIDTHS, QUANT_PARAMS
    ):
        s, z = _quant_params(dts, sc, zp, signed)
        with np.errstate(all="ignore"):
            want = ref_quant.quant(x, s, z, b, signed, narrow, mode)
        for name in ISAS:
            kernels.set_isa(name)
            try:
                assert_bitexact(kernels.quant(x, s, z, b, signed, narrow, mode), want)
            finally:
                kernels.set_isa("")


@needs_qonnx
@pytest.mark.parametrize("dts", QUANT_DTYPES, ids=lambda d: "-".join(_dt(t) for t in d))
def test_quant_reference_and_kernels_match_qonnx(dts, rng):
    x = _x16(rng).astype(dts[0])
    for mode, (signed, narrow), b, (sc, zp) in itertools.product(
        MODES, itertools.product([1, 0], repeat=2), QUANT_BITWIDTHS, QUANT_PARAMS
    ):
        s, z = _quant_params(dts, sc, zp, signed)
        with np.errstate(all="ignore"):
            want = np.asarray(qonnx_int_quant(x, s, z, b, signed, narrow, mode)).astype(F32)
            assert_bitexact(ref_quant.quant(x, s, z, b, signed, narrow, mode), want)
        assert_bitexact(kernels.quant(x, s, z, b, signed, narrow, mode), want)


def test_quant_float16_artefacts_are_reproduced(isa):
    """numpy's float16 steps, by hand: HALF_UP of 1025 is 1026 and HALF_DOWN of 1025 is 1024 (1025 +- 0.5 ties to
    even in float16), HALF_UP of 0.5 - 2^-12 is 1, x / scale overflows to inf (then clamps to max_int) and
    (q - zeropt) * scale rounds to float16 before the cast to float32."""
    x = np.array([1025, -1025, 0.5 - 2.0**-12, 1023.5], F16)
    one, zero, b = F16(1), F16(0), F16(16)  # float16 bit width 16: 2^16 is inf, no clamp
    assert_bitexact(kernels.quant(x, one, zero, b, True, False, "HALF_UP"), np.array([1026, -1026, 1, 1024], F32))
    assert_bitexact(kernels.quant(x, one, zero, b, True, False, "HALF_DOWN"), np.array([1024, -1024, -0.0, 1023], F32))
    # the same in float32 has none of them
    assert_bitexact(
        kernels.quant(x.astype(F32), F32(1), F32(0), F32(16), True, False, "HALF_UP"),
        np.array([1025, -1025, 0, 1024], F32),
    )
    # 100 / 2^-10 = 102400 is inf in float16; the clamp to max_int(8 bits) = 127 gives 127 * 2^-10
    got = kernels.quant(np.array([100, -100], F16), F16(2.0**-10), zero, F16(8), True, False, "ROUND")
    assert_bitexact(got, np.array([127 * 2.0**-10, -128 * 2.0**-10], F32))
    # (q - zeropt) * scale in float16: 3 * 0.1 is 0.2998 in float16 (0.30004883 as the float32 of float16 0.3001)
    got = kernels.quant(np.array([0.3], F16), F16(0.1), zero, F16(8), True, False, "ROUND")
    assert_bitexact(got, np.array([F16(F16(3) * F16(0.1))], F32))


def test_quant_float16_bounds(isa):
    """min_int/max_int in float16 arithmetic for a float16 bit width: 12 bits gives 4096 - 1 = 4096 (a tie to
    even); 16 unsigned or 17 signed bits give inf (2^16 overflows), so nothing is clamped there."""
    big = np.array([65504, -65504, np.inf, -np.inf, 4095.0], F16)
    one, zero = F16(1), F16(0)
    assert_bitexact(
        kernels.quant(big, one, zero, F16(12), False, False, "ROUND"), np.array([4096, 0, 4096, 0, 4096], F32)
    )
    assert_bitexact(kernels.quant(big, one, zero, F16(17), True, False, "ROUND"), big.astype(F32))
    assert_bitexact(
        kernels.quant(big, one, zero, F16(16), False, True, "ROUND"), np.array([65504, 0, np.inf, 0, 4096], F32)
    )
    # bipolar: signed 1-bit gives +-1 whatever the mode
    assert_bitexact(
        kernels.quant(np.array([-0.0, 0.1, -3, np.nan], F16), F16(0.5), zero, F16(1), True, True, "FLOOR"),
        np.array([0.5, 0.5, -0.5, -0.5], F32),
    )


@pytest.mark.parametrize("dts", QUANT_DTYPES, ids=lambda d: "-".join(_dt(t) for t in d))
@pytest.mark.parametrize("const", [False, True])
def test_quant_through_onnxruntime(dts, const, rng):
    x = _x16(rng, 240).astype(dts[0]).reshape(2, 3, 40)
    s = rng.uniform(0.05, 2.0, (1, 3, 1)).astype(dts[1])
    z = np.asarray(1.0, dts[2])
    for b, mode in [(F16(6), "HALF_UP"), (F32(8), "HALF_DOWN"), (np.int32(4), "FLOOR")]:
        attrs = {"signed": 1, "narrow": 0, "rounding_mode": mode}
        got = _run("Quant", [x, s, z, b], const=[const, True, True, True], attrs=attrs)
        with np.errstate(all="ignore"):
            assert_bitexact(got, ref_quant.quant(x, s, z, b, True, False, mode))
            if HAVE_QONNX:
                assert_bitexact(got, np.asarray(qonnx_int_quant(x, s, z, b, 1, 0, mode)).astype(F32))


def test_quant_broadcasting_threads_and_folding(rng):
    x = (rng.standard_normal((2, 16, 48, 48)) * 20).astype(F16)
    s = rng.uniform(0.05, 2.0, (1, 16, 1, 1)).astype(F16)
    z = rng.integers(-2, 3, (16, 1, 1)).astype(F16)
    for threads in (1, 2):
        got = _run("IntQuant", [x, s, z, F16(5)], const=[False, True, True, True], threads=threads)
        assert_bitexact(got, ref_quant.quant(x, s, z, F16(5)))
    # parameters larger than X (X broadcast along the rows)
    xs = x[0, :, :1, :1]
    sb = rng.uniform(0.05, 2.0, (16, 3, 5)).astype(F16)
    assert_bitexact(kernels.quant(xs, sb, F16(0), F16(4)), ref_quant.quant(xs, sb, F16(0), F16(4)))
    # all-constant node: computed once at creation
    w = (rng.standard_normal((8, 3, 3, 3))).astype(F16)
    model, _ = make_node_model("Quant", DOMAIN, [w, F16(0.05), F16(0), F16(4)], const=True)
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        assert_bitexact(sess.run(None, {})[0], ref_quant.quant(w, F16(0.05), F16(0), F16(4)))


# ---- BipolarQuant -------------------------------------------------------------------------------------------

SPECIAL_SCALES16 = np.array([0.25, 1.0, 0.0, -0.0, -0.5, np.inf, -np.inf, np.nan, 2.0**-24, 65504], F16)


@pytest.mark.parametrize("dts", list(itertools.product([F16, F32], repeat=2)), ids=lambda d: "-".join(map(_dt, d)))
def test_bipolar_kernels_every_isa_and_qonnx(isa, dts, rng):
    x = _x16(rng, 150).astype(dts[0])
    xs = np.repeat(SPECIAL_F16, SPECIAL_SCALES16.size).astype(dts[0])
    ss = np.tile(SPECIAL_SCALES16, SPECIAL_F16.size).astype(dts[1])
    out = F16 if dts == (F16, F16) else F32
    for xa, sa in [
        (x, np.asarray(-0.75, dts[1])),
        (x.reshape(3, 50), SPECIAL_SCALES16[:3, None].astype(dts[1])),
        (xs, ss),
    ]:
        got = kernels.bipolar_quant(xa, sa)
        want = ref.bipolar_quant(xa, sa)
        assert want.dtype == out
        assert_bitexact(got, want)
        if HAVE_QONNX:
            assert_bitexact(got, qonnx_execute(qonnx_node("BipolarQuant", 2), [xa, sa]))


@pytest.mark.parametrize("dts", list(itertools.product([F16, F32], repeat=2)), ids=lambda d: "-".join(map(_dt, d)))
@pytest.mark.parametrize("const", [False, True])
def test_bipolar_through_onnxruntime(dts, const, rng):
    x = _x16(rng, 120).astype(dts[0]).reshape(4, 30)
    s = SPECIAL_SCALES16[:4, None].astype(dts[1])
    out = FLOAT16 if dts == (F16, F16) else TensorProto.FLOAT
    got = _run("BipolarQuant", [x, s], const=[const, True], out=out)
    assert_bitexact(got, ref.bipolar_quant(x, s))
    if HAVE_QONNX:
        assert_bitexact(got, qonnx_execute(qonnx_node("BipolarQuant", 2), [x, s]))


@needs_qonnx
def test_bipolar_rank0_float16_differs_from_qonnx_in_dtype_only():
    """qonnx multiplies two 0-d arrays into a numpy scalar, which its asarray(..., float32) turns into float32; an
    ONNX output type cannot depend on ranks, so ortquant keeps float16 (same value)."""
    x, s = np.asarray(-2.0, F16), np.asarray(0.75, F16)
    want = qonnx_execute(qonnx_node("BipolarQuant", 2), [x, s])
    assert want.dtype == F32
    got = _run("BipolarQuant", [x, s], out=FLOAT16)
    assert got.dtype == F16
    assert_bitexact(got.astype(F32), want)


# ---- Trunc / TruncQuant -------------------------------------------------------------------------------------

V1_BITWIDTHS16 = [(8, 4), (8, 8), (4, 8), (16, 3), (24, 6), (30, 2), (8, 2.5), (7.5, 3)]
V1_PARAMS16 = [(0.5, 0.0), (0.37, 3.0), (1.0, 0.25), (2.0**-10, 0.0)]


def test_trunc_v1_float16_every_isa_and_qonnx(isa, rng):
    """All float16: output float16. 2^(in - out) is float16 arithmetic (24 - 6 = 18 bits: 2^18 = inf, so the
    quotient is 0)."""
    x = _x16(rng)
    for mode, (bi, bo), (sc, zp) in itertools.product(MODES, V1_BITWIDTHS16, V1_PARAMS16):
        args = (x, F16(sc), F16(zp), F16(bi), F16(bo))
        with np.errstate(all="ignore"):
            want = ref.trunc_v1(*args, rounding_mode=mode)
            assert want.dtype == F16
            if HAVE_QONNX:
                assert_bitexact(want, qonnx_trunc_v1(*args, mode))
        assert_bitexact(kernels.trunc(*args, rounding_mode=mode), want)


V2_OUT = [(1.0, F16(4)), (2.0, F32(5)), (0.0625, np.int32(8)), (0.5, F16(16)), (8.0, F16(2.5)), (3.0, F32(3))]


def test_trunc_v2_float16_every_isa_and_qonnx(isa, rng):
    """All float16 (out_bitwidth float16, float32 or int32): output float16; the ratio, 2^round(log2), the bounds'
    cast and zeropt / t are float16 values."""
    x = _x16(rng)
    for mode, (signed, narrow), (os_, ob), (sc, zp) in itertools.product(
        MODES, itertools.product([1, 0], repeat=2), V2_OUT, [(0.25, 0.0), (0.37, 3.0), (0.5, -1.0)]
    ):
        args = (x, F16(sc), F16(zp), F16(8), F16(os_ * sc), ob)
        with np.errstate(all="ignore"):
            want = ref.trunc_v2(*args, signed=bool(signed), narrow=bool(narrow), rounding_mode=mode)
            assert want.dtype == F16
            if HAVE_QONNX:
                assert_bitexact(want, qonnx_trunc_v2(x, args[1], args[2], args[3], narrow, signed, args[4], ob, mode))
        got = kernels.trunc(x, args[1], args[2], args[3], ob, args[4], bool(signed), bool(narrow), mode)
        assert_bitexact(got, want)


def test_trunc_float16_x_with_float32_parameters(isa, rng):
    """X float16, the rest float32 (or int32 bit widths): numpy promotes at X / scale, so this is the float32 op on
    X converted exactly (float64 after the first rounding with int32 bit widths in v1); output float32."""
    x = _x16(rng)
    for mode in MODES:
        for bi, bo in [(F32(8), F32(4)), (np.int32(12), np.int32(5)), (F32(7.5), F32(3))]:
            args = (x, F32(0.37), F32(3), bi, bo)
            want = ref.trunc_v1(x.astype(F32), *args[1:], rounding_mode=mode)
            assert_bitexact(kernels.trunc(*args, rounding_mode=mode), want)
            if HAVE_QONNX:
                with np.errstate(all="ignore"):
                    assert_bitexact(want, np.asarray(qonnx_trunc_v1(*args, mode)).astype(F32))
        want = ref.trunc_v2(x.astype(F32), F32(0.37), F32(3), F32(8), F32(0.74), F32(4), rounding_mode=mode)
        assert_bitexact(kernels.trunc(x, F32(0.37), F32(3), F32(8), F32(4), F32(0.74), rounding_mode=mode), want)
        if HAVE_QONNX:
            with np.errstate(all="ignore"):
                q = qonnx_trunc_v2(x, F32(0.37), F32(3), F32(8), 0, 1, F32(0.74), F32(4), mode)
            assert_bitexact(want, q)


def test_trunc_float16_broadcasting(isa, rng):
    x = (rng.standard_normal((3, 4, 20)) * 30).astype(F16)
    s = rng.uniform(0.1, 2, (1, 4, 1)).astype(F16)
    z = rng.integers(-2, 3, (3, 1, 1)).astype(F16)
    ob = np.array([3, 4, 5, 8], F16).reshape(1, 4, 1)
    assert_bitexact(kernels.trunc(x, s, z, F16(8), ob), ref.trunc_v1(x, s, z, F16(8), ob))
    os_ = (s * F16(4)).astype(F16)
    got = kernels.trunc(x, s, z, F16(8), ob, os_, True, True, "HALF_UP")
    assert_bitexact(got, ref.trunc_v2(x, s, z, F16(8), os_, ob, True, True, "HALF_UP"))
    xs = x[:1, :1, :1]  # parameters larger than X
    assert_bitexact(kernels.trunc(xs, s, z, F16(8), ob), ref.trunc_v1(xs, s, z, F16(8), ob))


@pytest.mark.parametrize("const", [False, True])
def test_trunc_through_onnxruntime(const, rng):
    x = _x16(rng, 240).reshape(2, 3, 40)
    s = rng.uniform(0.1, 2, (1, 3, 1)).astype(F16)
    z = np.asarray(1.0, F16)
    cst = [const, True, True, True, True, True]
    # all float16, v1 and v2 (out_bitwidth float16 and int32), output float16
    got = _run("Trunc", [x, s, z, F16(8), F16(3)], const=cst[:5], attrs={"rounding_mode": "ROUND"}, out=FLOAT16)
    assert_bitexact(got, ref.trunc_v1(x, s, z, F16(8), F16(3), "ROUND"))
    os_ = (s * F16(8)).astype(F16)
    for ob in (F16(4), np.int32(4)):
        attrs = {"rounding_mode": "HALF_DOWN", "signed": 0, "narrow": 1}
        got = _run("TruncQuant", [x, s, z, F16(8), os_, ob], const=cst, attrs=attrs, out=FLOAT16, opset=2)
        assert_bitexact(got, ref.trunc_v2(x, s, z, F16(8), os_, ob, False, True, "HALF_DOWN"))
    # float16 X, float32 parameters: output float32
    xs, zs = x.astype(F32), F32(1)
    sf = s.astype(F32)
    got = _run("Trunc", [x, sf, zs, F32(8), np.int32(3)], const=cst[:5], attrs={"rounding_mode": "UP"})
    assert_bitexact(got, ref.trunc_v1(xs, sf, zs, F32(8), np.int32(3), "UP"))
    # all-constant float16 node (folded at creation), two threads on a bigger runtime tensor
    model, _ = make_node_model("Trunc", DOMAIN, [x, s, z, F16(8), F16(3)], const=True)
    model.graph.output[0].type.tensor_type.elem_type = FLOAT16
    assert_bitexact(ortquant.InferenceSession(model).run(None, {})[0], ref.trunc_v1(x, s, z, F16(8), F16(3)))
    big = (rng.standard_normal((4, 3, 64, 64)) * 30).astype(F16)
    got = _run("Trunc", [big, s[..., None], z, F16(8), F16(4)], const=cst[:5], out=FLOAT16, threads=2)
    assert_bitexact(got, ref.trunc_v1(big, s[..., None], z, F16(8), F16(4)))


@needs_qonnx
def test_trunc_v2_exact_exponent_differs_from_qonnx_only_near_sqrt2():
    """Decision 6 in float16: t = 2^(the exact nearest integer to log2 of the float16 ratio). qonnx's float16
    log2 comes out as exactly k + 0.5 (which then rounds to even) for ratios within a few tenths of a percent of
    2^k * sqrt(2); only there do the two differ, and there ortquant's t is the nearer power of two."""
    x = np.arange(-40, 40, dtype=F16) * F16(13)
    differs = 0
    for r in np.array([1448, 1449, 1450, 1024, 22.6, 23.0, 5.65, 5.66, 0.25, 3.0, 12.0], F16):
        ours = ref.trunc_scale_v2(r, F16(1))
        with np.errstate(all="ignore"):
            theirs = F16(2) ** np.round(np.log2(r))
        got = kernels.trunc(x, F16(1), F16(0), F16(8), np.int32(16), r, rounding_mode="ROUND")
        assert_bitexact(got, ref.trunc_v2(x, F16(1), F16(0), F16(8), r, np.int32(16), rounding_mode="ROUND"))
        with np.errstate(all="ignore"):
            q = qonnx_trunc_v2(x, F16(1), F16(0), F16(8), 0, 1, r, np.int32(16), "ROUND")
        if ours == theirs:
            assert_bitexact(got, q)
            continue
        differs += 1
        lr = np.log2(float(r))
        assert abs(lr - (np.floor(lr) + 0.5)) < 0.005  # next to 2^k * sqrt(2)
        assert abs(np.log2(float(ours)) - lr) < 0.5 < abs(np.log2(float(theirs)) - lr)
    assert differs == 3  # 1449, 1450, 5.66
    # over every positive finite float16 ratio: the two agree except where numpy's float16 log2 is exactly k + 0.5
    r = np.arange(1, 0x7C00, dtype=np.uint16).view(F16)
    ours = ref.trunc_scale_v2(r, F16(1))
    lg = np.log2(r)
    with np.errstate(over="ignore"):
        theirs = (F16(2) ** np.round(lg)).astype(F16)
    tie = lg - np.floor(lg) == F16(0.5)
    assert_bitexact(ours[~tie], theirs[~tie])
    assert (ours[tie] != theirs[tie]).sum() == 83


# ---- FloatQuant ---------------------------------------------------------------------------------------------

FORMATS16 = [
    ("E4M3", 4, 3, 7, 448.0),
    ("E5M2", 5, 2, 15, 57344.0),  # the formula max is inf in float16 (2^16), max_val decides
    ("E4M3-formula-max", 4, 3, 7, 65504.0),
    ("E2M1", 2, 1, 1, 6.0),
    ("E3M2", 3, 2, 3, 28.0),
    ("fp16", 5, 10, 15, 65504.0),
    ("E5M10-bias20", 5, 10, 20, 1.0),  # a subnormal grid finer than float16's
    ("E8M12", 8, 12, 20, 100.0),  # steps 2^(k - 12) below 2^-24 are 0 in float16: NaN (0 * round(v / 0))
    ("E1M1", 1, 1, 0, 3.0),
]
OVERFLOWS = [(True, False, False), (False, True, False), (False, False, True)]


def _fq_args(fmt: tuple, scale: float, dtype: type) -> tuple:
    _, e, m, b, mv = fmt
    return (dtype(scale), dtype(e), dtype(m), dtype(b), dtype(mv))


def _log2_region16(x: np.ndarray, scale: np.generic) -> np.ndarray:
    """Where numpy's float16 floor(log2(|x/scale| + tiny)) is not the exact binary exponent (decision 7)."""
    with np.errstate(all="ignore"):
        a = np.abs(x / scale) + np.finfo(F16).tiny
        _, ex = np.frexp(np.where(np.isfinite(a), a, F16(1)))
        return np.isfinite(a) & (np.floor(np.log2(a)) != ex - 1)


@pytest.mark.parametrize("fmt", FORMATS16, ids=lambda f: f[0])
def test_float_quant_float16_every_isa(isa, fmt, rng):
    x = _x16(rng, 400, 30.0)
    for mode, (sat, inf, nan), scale in itertools.product(MODES, OVERFLOWS, [1.0, 0.37, 2.0**-8]):
        for dtype in (F16, F32):  # all float16, or float16 X with float32 parameters
            args = _fq_args(fmt, scale, dtype)
            with np.errstate(all="ignore"):
                want = ref.float_quant(x, *args, mode, inf, nan, sat)
            assert_bitexact(kernels.float_quant(x, *args, mode, inf, nan, sat), want)


@needs_qonnx
@pytest.mark.parametrize("fmt", FORMATS16, ids=lambda f: f[0])
def test_float_quant_float16_against_qonnx(fmt, rng):
    """Equal to qonnx everywhere except where its float16 log2 rounds up to the next integer (decision 7), which
    in float16 is up to five values just below some powers of two; with float32 parameters there is no such place
    here (float32 log2 of a float16 value is exact enough)."""
    x = _x16(rng, 400, 30.0)
    for mode, (sat, inf, nan), scale in itertools.product(MODES, OVERFLOWS, [1.0, 0.37]):
        for dtype in (F16, F32):
            args = _fq_args(fmt, scale, dtype)
            with np.errstate(all="ignore"):
                want = np.asarray(qonnx_float_quant(x, *args[:4], True, args[4], inf, nan, False, mode, sat)).astype(
                    F32
                )
            got = kernels.float_quant(x, *args, mode, inf, nan, sat)
            if dtype is F32:
                assert_bitexact(got, want)
                continue
            region = _log2_region16(x, args[0])
            assert_bitexact(got[~region], want[~region])


@needs_qonnx
def test_float_quant_float16_log2_region():
    """The values where qonnx's float16 log2 picks the coarser step: ours is the float16 arithmetic with the
    exact exponent, qonnx's the same with the exponent one higher; they differ where the rounding goes toward
    zero, and for the nearest modes only when M is large (M = 10: the step is finer than the region)."""
    xs = []
    for k in range(2, 16):
        v = F16(2.0**k)
        for _ in range(4):
            v = np.nextafter(v, F16(0))
            xs.append(v)
    x = np.array(xs + [-v for v in xs], F16)
    region = _log2_region16(x, F16(1))
    assert region.any()
    for fmt, mode in itertools.product(FORMATS16[:6], MODES):
        args = _fq_args(fmt, 1.0, F16)
        got = kernels.float_quant(x, *args, mode)
        with np.errstate(all="ignore"):
            want = np.asarray(qonnx_float_quant(x, *args[:4], True, args[4], False, False, False, mode, True))
        assert_bitexact(got[~region], want.astype(F32)[~region])
        if mode in ("ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN") and fmt[2] <= 3:
            assert_bitexact(got, want.astype(F32))  # coarse FP8 grids: the nearest modes agree even there


def test_float_quant_float16_special_steps(isa):
    """E5M2's formula max overflows float16 (2^16), so max_val decides; with M = 12 and bias 20 the step of small
    values, 2^(-14 - 12), is 0 in float16, so they give NaN as in qonnx (0 * round(v / 0))."""
    x = np.array([60000, -60000, 1e-3, 65504, np.inf], F16)
    got = kernels.float_quant(x, F16(1), F16(5), F16(2), F16(15), F16(57344))
    assert_bitexact(got, np.array([57344, -57344, 2.0**-10, 57344, np.nan], F32))
    assert ref.float_formula_max_half(5, 2, 15) == np.inf
    got = kernels.float_quant(np.array([2.0**-20, 0.0, 1.0], F16), F16(1), F16(8), F16(12), F16(20), F16(100))
    assert_bitexact(got, np.array([np.nan, np.nan, 1.0], F32))


@pytest.mark.parametrize("const", [False, True])
def test_float_quant_through_onnxruntime(const, rng):
    x = _x16(rng, 240, 30.0).reshape(2, 3, 40)
    s = rng.uniform(0.1, 2, (1, 3, 1)).astype(F16)
    attrs = {"rounding_mode": "HALF_UP", "has_inf": 1, "saturation": 0}
    args16 = [F16(4), F16(3), F16(7), F16(448)]
    got = _run("FloatQuant", [x, s, *args16], const=[const] + [True] * 5, attrs=attrs)
    assert_bitexact(got, ref.float_quant(x, s, *args16, "HALF_UP", True, False, False))
    args32 = [F32(4), F32(3), F32(7), F32(448)]
    got = _run("FloatQuant", [x, s.astype(F32), *args32], const=[const] + [True] * 5, attrs=attrs)
    assert_bitexact(got, ref.float_quant(x, s.astype(F32), *args32, "HALF_UP", True, False, False))


@pytest.mark.parametrize("mode", MODES)
def test_all_float16_every_mode_through_onnxruntime(mode, rng):
    """Quant, Trunc v1 and v2 on float16 through onnxruntime for every mode, signed/narrow and bit-width dtype."""
    x = _x16(rng, 160).reshape(4, 40)
    s = np.array([0.37, 0.5, 2.0**-10, 1000], F16).reshape(4, 1)
    z = F16(1)
    for (signed, narrow), b in itertools.product(itertools.product([1, 0], repeat=2), [F16(5), F32(8), np.int32(3)]):
        attrs = {"signed": signed, "narrow": narrow, "rounding_mode": mode}
        got = _run("Quant", [x, s, z, b], const=[False, True, True, True], attrs=attrs)
        with np.errstate(all="ignore"):
            want = ref_quant.quant(x, s, z, b, bool(signed), bool(narrow), mode)
            assert_bitexact(got, want)
            if HAVE_QONNX:
                assert_bitexact(got, np.asarray(qonnx_int_quant(x, s, z, b, signed, narrow, mode)).astype(F32))
        os_ = (s * F16(4)).astype(F16)
        got = _run("Trunc", [x, s, z, F16(8), os_, b], const=[False] + [True] * 5, attrs=attrs, out=FLOAT16, opset=2)
        with np.errstate(all="ignore"):
            want = ref.trunc_v2(x, s, z, F16(8), os_, b, bool(signed), bool(narrow), mode)
            assert_bitexact(got, want)
            if HAVE_QONNX:
                assert_bitexact(got, qonnx_trunc_v2(x, s, z, F16(8), narrow, signed, os_, b, mode))
    attrs = {"rounding_mode": mode}
    got = _run("Trunc", [x, s, z, F16(12), F16(5)], const=[False] + [True] * 4, attrs=attrs, out=FLOAT16)
    with np.errstate(all="ignore"):
        want = ref.trunc_v1(x, s, z, F16(12), F16(5), mode)
        assert_bitexact(got, want)
        if HAVE_QONNX:
            assert_bitexact(got, qonnx_trunc_v1(x, s, z, F16(12), F16(5), mode))


# ---- dtype rules ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,inputs,opset",
    [
        ("Trunc", [np.ones(4, F16), F16(1), F32(0), F16(8), F16(4)], 1),  # zeropt float32 with float16 scale
        ("Trunc", [np.ones(4, F32), F16(1), F16(0), F16(8), F16(4)], 1),  # float32 X with float16 parameters
        ("Trunc", [np.ones(4, F16), F16(1), F16(0), F16(8), F32(2), F16(4)], 2),  # out_scale float32
        ("FloatQuant", [np.ones(4, F16), F16(1), F32(4), F32(3), F32(7), F32(448)], 1),
        ("FloatQuant", [np.ones(4, F32), F16(1), F16(4), F16(3), F16(7), F16(448)], 1),
        ("Quant", [np.ones(4, np.float64), F16(1), F16(0), F16(8)], 1),
        ("BipolarQuant", [np.ones(4, F16), np.float64(1)], 1),
    ],
)
def test_unsupported_dtype_combinations_fail_at_load(op, inputs, opset):
    msg = _load_error(op, inputs, const=[False] + [True] * (len(inputs) - 1), opset=opset)
    assert f"{op.lower()}_node" in msg and op in msg


@pytest.mark.parametrize("const", [False, True])
def test_float16_trunc_v1_needs_float16_bit_widths(const):
    """A float32 in_bitwidth with float16 data would make numpy switch to float32 mid-way (and return float32):
    refused at session creation when constant, at run time otherwise."""
    inputs = [np.ones(4, F16), F16(1), F16(0), F32(8), F16(4)]
    msg = _load_error("Trunc", inputs, const=[False, True, True, const, True], out=FLOAT16)
    assert "trunc_node" in msg and "in_bitwidth" in msg and "float16" in msg


@pytest.mark.parametrize("b", [F16(0), F16(-3), F16(np.inf), F16(np.nan)])
def test_bad_float16_bitwidth(b):
    msg = _load_error("Quant", [np.ones(4, F16), F16(1), F16(0), b], const=[False, True, True, True])
    assert "quant_node" in msg and "bitwidth" in msg


def test_float16_models_pass_the_checker_and_infer_types():
    """The schemas accept the float16 combinations and infer float16 exactly where qonnx returns float16."""
    ortquant.register_schemas()
    cases = [
        ("Quant", [FLOAT16, FLOAT16, FLOAT16, FLOAT16], TensorProto.FLOAT, 1),
        ("BipolarQuant", [FLOAT16, FLOAT16], FLOAT16, 1),
        ("BipolarQuant", [FLOAT16, TensorProto.FLOAT], TensorProto.FLOAT, 1),
        ("Trunc", [FLOAT16] * 5, FLOAT16, 1),
        (
            "Trunc",
            [FLOAT16, TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT32],
            TensorProto.FLOAT,
            1,
        ),
        ("Trunc", [FLOAT16, FLOAT16, FLOAT16, FLOAT16, FLOAT16, TensorProto.INT32], FLOAT16, 2),
        ("FloatQuant", [FLOAT16] * 6, TensorProto.FLOAT, 1),
        ("FloatQuant", [FLOAT16] + [TensorProto.FLOAT] * 5, TensorProto.FLOAT, 1),
    ]
    for op, types, out, version in cases:
        inits = [
            numpy_helper.from_array(np.asarray(4, onnx.helper.tensor_dtype_to_np_dtype(t)), f"p{i}")
            for i, t in enumerate(types[1:], 1)
        ]
        node = helper.make_node(op, ["x"] + [f"p{i}" for i in range(1, len(types))], ["y"], domain=DOMAIN)
        g = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", types[0], ["N", 8])], [], initializer=inits
        )
        g.output.append(helper.make_tensor_value_info("y", out, ["N", 8]))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, version)])
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        vi = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        assert vi["y"].type.tensor_type.elem_type == out, (op, types)
    # and onnxruntime runs such a model (float16 in, float16 out)
    x = np.arange(-4, 4, dtype=F16)
    model, feeds = make_node_model("BipolarQuant", DOMAIN, [x, F16(0.5)], const=[False, True])
    model.graph.output[0].type.tensor_type.elem_type = FLOAT16
    so = ort.SessionOptions()
    so.log_severity_level = 3
    (y,) = ortquant.InferenceSession(model, sess_options=so).run(None, feeds)
    assert_bitexact(y, ref.bipolar_quant(x, F16(0.5)))
