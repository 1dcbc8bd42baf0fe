"""QONNX Trunc / TruncQuant (v1 with 5 inputs, v2 with 6; decision 6): C++ (through onnxruntime and through
ortquant._C on every ISA) vs the numpy reference, and vs qonnx itself."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import onnxruntime as ort
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


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _inputs(rng: np.random.Generator, shape=(2, 3, 4, 5), mag: float = 40) -> np.ndarray:
    x = (rng.standard_normal(shape) * mag).astype(F32)
    flat = x.reshape(-1)
    flat[: SPECIAL_F32.size] = SPECIAL_F32
    # x / 0.5 lands on integers that are odd multiples of 2^(k-1): ties after the division by 2^k
    flat[SPECIAL_F32.size : SPECIAL_F32.size + 16] = np.arange(-8, 8, dtype=F32) * 0.5 + 0.25
    return x


def _bw(v: float | int, as_int: bool) -> np.ndarray:
    return np.asarray(v, np.int32) if as_int else np.asarray(v, F32)


V1_BITWIDTHS = [(8, 4), (8, 8), (16, 3), (4, 8), (32, 1), (24, 2), (8, 2.5), (7.3, 3), (9.5, 1.25)]
SCALES = [(F32(0.5), F32(0)), (F32(0.37), F32(3)), (F32(1), F32(0.3))]


@pytest.mark.parametrize("mode", MODES)
def test_v1_kernels_match_reference(isa, mode, rng):
    x = _inputs(rng)
    for (bi, bo), (s, z) in itertools.product(V1_BITWIDTHS, SCALES):
        for as_int in (False, True):
            if as_int and not (float(bi).is_integer() and float(bo).is_integer()):
                continue
            a, b = _bw(bi, as_int), _bw(bo, as_int)
            got = kernels.trunc(x, s, z, a, b, rounding_mode=mode)
            assert_bitexact(got, ref.trunc_v1(x, s, z, a, b, mode))
    # one bit width int32, the other float32 (numpy computes the tail in float64 then)
    for a, b in [(np.int32(8), F32(3)), (F32(8), np.int32(3)), (F32(8.5), np.int32(3))]:
        got = kernels.trunc(x, F32(0.37), F32(0.3), a, b, rounding_mode=mode)
        assert_bitexact(got, ref.trunc_v1(x, F32(0.37), F32(0.3), a, b, mode))


V2_BITWIDTHS = [1, 2, 3, 4, 8, 16, 24, 31, 2.5, 7.3]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signed,narrow", list(itertools.product([True, False], [True, False])))
def test_v2_kernels_match_reference(isa, mode, signed, narrow, rng):
    x = _inputs(rng, mag=200)
    s = F32(0.37)
    for bo, ratio, z in itertools.product(V2_BITWIDTHS, [0.25, 1, 2, 8, 3, 0.7, 2**20], [F32(0), F32(2)]):
        os_ = F32(s * F32(ratio))
        for as_int in (False, True):
            if as_int and not float(bo).is_integer():
                continue
            b = _bw(bo, as_int)
            got = kernels.trunc(x, s, z, F32(16), b, out_scale=os_, signed=signed, narrow=narrow, rounding_mode=mode)
            assert_bitexact(got, ref.trunc_v2(x, s, z, F32(16), os_, b, signed, narrow, mode))


@pytest.mark.parametrize("mode", ["FLOOR", "ROUND", "HALF_UP", "UP"])
def test_kernels_per_channel_and_broadcast(isa, mode, rng):
    x = _inputs(rng, (3, 4, 5, 6))
    cases = [
        ((1, 4, 1, 1), (1, 4, 1, 1), (1, 4, 1, 1)),  # per-channel activation, per-channel bit widths
        ((3, 1, 1, 1), (), ()),  # per-output-channel weight
        ((6,), (5, 1), (1,)),  # mixed broadcast, innermost parameters vary
        ((1, 1, 5, 6), (), (1, 1, 1, 6)),
        ((2, 3, 4, 5, 6), (), ()),  # parameters of higher rank than x
    ]
    for s_shape, z_shape, b_shape in cases:
        s = rng.uniform(0.1, 2, s_shape).astype(F32)
        z = rng.integers(-3, 3, z_shape).astype(F32)
        bo = rng.integers(2, 9, b_shape).astype(F32)
        bi = (bo + rng.integers(0, 5, b_shape)).astype(F32)
        assert_bitexact(kernels.trunc(x, s, z, bi, bo, rounding_mode=mode), ref.trunc_v1(x, s, z, bi, bo, mode))
        os_ = (s * F32(2.0) ** rng.integers(-2, 4, s_shape).astype(F32)).astype(F32)
        for signed in (True, False):
            got = kernels.trunc(x, s, z, bi, bo, out_scale=os_, signed=signed, rounding_mode=mode)
            assert_bitexact(got, ref.trunc_v2(x, s, z, bi, os_, bo, signed, False, mode))
    # x broadcast along the innermost dimension (parameters larger than x)
    x1 = np.array([[-3.3], [0.0], [7.9]], F32)
    s = rng.uniform(0.1, 2, (3, 40)).astype(F32)
    assert_bitexact(
        kernels.trunc(x1, s, F32(0), F32(8), F32(3), rounding_mode=mode),
        ref.trunc_v1(x1, s, F32(0), F32(8), F32(3), mode),
    )
    assert_bitexact(
        kernels.trunc(x1, s, F32(0), F32(8), F32(3), out_scale=s * F32(4), rounding_mode=mode),
        ref.trunc_v2(x1, s, F32(0), F32(8), s * F32(4), F32(3), True, False, mode),
    )


def test_v2_ignores_in_bitwidth_even_for_the_shape():
    x = np.arange(-6, 6, dtype=F32)
    a = kernels.trunc(x, F32(1), F32(0), np.full((2, 1, 1), 99, F32), F32(4), out_scale=F32(2))
    b = kernels.trunc(x, F32(1), F32(0), F32(3), F32(4), out_scale=F32(2))
    assert_bitexact(a, b)


# ---- through onnxruntime -----------------------------------------------------------------------------------


def _v1_inputs(rng):
    x = _inputs(rng)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(F32)
    return [x, s, F32(0), F32(8), F32(5)]


def _v2_inputs(rng):
    x = _inputs(rng, mag=200)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(F32)
    return [x, s, F32(0), F32(8), (s * F32(4)).astype(F32), F32(5)]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("op", ["Trunc", "TruncQuant"])
@pytest.mark.parametrize("const", [False, True])
def test_ort_v1_matches_reference(domain, op, const, rng):
    inputs = _v1_inputs(rng)
    (y,) = run_node(op, domain, inputs, const=[const] + [True] * 4, attrs={"rounding_mode": "round"})
    assert_bitexact(y, ref.trunc_v1(*inputs, "ROUND"))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("op", ["Trunc", "TruncQuant"])
@pytest.mark.parametrize("const", [False, True])
def test_ort_v2_matches_reference(domain, op, const, rng):
    inputs = _v2_inputs(rng)
    attrs = {"rounding_mode": "Floor", "signed": 0, "narrow": 1}
    (y,) = run_node(op, domain, inputs, const=[const] + [True] * 5, attrs=attrs, opset=2)
    assert_bitexact(y, ref.trunc_v2(*inputs, False, True, "FLOOR"))


def test_ort_runtime_parameters_and_threads(rng):
    x = (rng.standard_normal((4, 64, 32, 32)) * 30).astype(F32)
    s = rng.uniform(0.05, 1.0, (1, 64, 1, 1)).astype(F32)
    os_ = (s * F32(8)).astype(F32)
    for threads in (1, 2):
        v1 = [x, s, F32(0.0), np.int32(8), np.int32(4)]
        (y,) = run_node("Trunc", DOMAINS[0], v1, threads=threads)
        assert_bitexact(y, ref.trunc_v1(*v1, "FLOOR"))
        v2 = [x, s, F32(1.0), F32(8), os_, np.int32(4)]
        (y,) = run_node("Trunc", DOMAINS[0], v2, threads=threads, opset=2)
        assert_bitexact(y, ref.trunc_v2(*v2, True, False, "FLOOR"))


def test_missing_rounding_mode_is_floor(rng):
    """qonnx requires rounding_mode (schema default FLOOR); ortquant uses FLOOR when it is missing."""
    inputs = _v1_inputs(rng)
    (y,) = run_node("Trunc", DOMAINS[0], inputs)
    assert_bitexact(y, ref.trunc_v1(*inputs, "FLOOR"))


def test_constant_node_is_folded_and_exact(rng):
    """All-constant Trunc is computed once at session creation (decision 18)."""
    inputs = _v2_inputs(rng)
    model, _ = make_node_model("Trunc", DOMAINS[0], inputs, const=True, opset=2, attrs={"rounding_mode": "ROUND"})
    sess = ortquant.InferenceSession(model)
    for _ in range(3):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.trunc_v2(*inputs, True, False, "ROUND"))


def test_input_count_selects_the_version_in_plain_onnxruntime(rng):
    """Without ortquant.prepare_model the kernel follows the input count: 6 inputs run v2 even at opset 1."""
    inputs = _v2_inputs(rng)
    model, feeds = make_node_model("Trunc", DOMAINS[0], inputs, opset=1)
    so = ort.SessionOptions()
    ortquant.register(so)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, feeds)
    assert_bitexact(y, ref.trunc_v2(*inputs, True, False, "FLOOR"))


def test_zero_and_negative_scale_follow_qonnx():
    x = np.array([-1.0, 0.0, -0.0, 1.0, 2.0, 300.0], F32)
    for s in (F32(0.0), F32(-0.5), F32(-0.0)):
        v1 = [x, s, F32(0), F32(8), F32(4)]
        (y,) = run_node("Trunc", DOMAINS[0], v1)
        assert_bitexact(y, ref.trunc_v1(*v1, "FLOOR"))
        for os_ in (F32(1), F32(-2), F32(0)):
            v2 = [x, s, F32(0), F32(8), os_, F32(4)]
            (y,) = run_node("Trunc", DOMAINS[0], v2, opset=2)
            assert_bitexact(y, ref.trunc_v2(*v2, True, False, "FLOOR"))


# ---- bad input ---------------------------------------------------------------------------------------------


def _error(model_feeds, session=ortquant.InferenceSession) -> str:
    model, feeds = model_feeds
    with pytest.raises(Exception) as e:
        session(model).run(None, feeds)
    return str(e.value)


def _v1_model(attrs=None, inputs=None, const=False, opset=1):
    inputs = inputs or [np.ones(3, F32), F32(1), F32(0), F32(8), F32(4)]
    return make_node_model(
        "Trunc", DOMAINS[0], inputs, attrs=attrs, const=[False] + [const] * (len(inputs) - 1), opset=opset
    )


@pytest.mark.parametrize("const", [False, True])
def test_bad_rounding_mode_fails_at_session_creation(const):
    model, _ = _v1_model({"rounding_mode": "SIDEWAYS"}, const=const)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    msg = str(e.value)
    assert "trunc_node" in msg and "rounding_mode" in msg and "SIDEWAYS" in msg


@pytest.mark.parametrize(
    "attrs,name",
    [
        ({"signed": 2}, "'signed'"),
        ({"narrow": -1}, "'narrow'"),
        ({"narrow": "yes"}, "'narrow'"),
        ({"rounding_mode": 3}, "'rounding_mode'"),
    ],
)
def test_bad_attributes(attrs, name):
    model, _ = _v1_model(attrs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert "trunc_node" in str(e.value) and name in str(e.value)


@pytest.mark.parametrize("const", [False, True])
def test_bad_bitwidths(const):
    x = np.ones(3, F32)
    cases = [
        ([x, F32(1), F32(0), np.int16(8), F32(4)], 1, "in_bitwidth"),
        ([x, F32(1), F32(0), F32(8), np.uint8(4)], 1, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(0), F32(4)], 1, "in_bitwidth"),
        ([x, F32(1), F32(0), F32(8), np.int32(-2)], 1, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(8), F32(np.nan)], 1, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(8), F32(1), F32(0)], 2, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(8), F32(1), np.int32(63)], 2, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(8), F32(1), np.array([4, -4], F32)], 2, "out_bitwidth"),
        ([x, F32(1), F32(0), F32(8), np.int32(1), F32(4)], 2, "out_scale"),
    ]
    for inputs, opset, word in cases:
        msg = _error(_v1_model(inputs=inputs, const=const, opset=opset))
        assert "trunc_node" in msg and word in msg, msg


def test_wrong_dtype_of_x_is_refused():
    # float64 X is accepted (tests/qonnx/test_wide_params.py); an integer X is not a Trunc input
    msg = _error(_v1_model(inputs=[np.ones(3, np.int32), F32(1), F32(0), F32(8), F32(4)]))
    assert "trunc_node" in msg and "int32" in msg


def test_unbroadcastable_shapes():
    for opset, extra in ((1, []), (2, [F32(4)])):
        inputs = [np.ones((2, 3), F32), np.ones(4, F32), F32(0), F32(8), F32(4), *extra]
        msg = _error(_v1_model(inputs=inputs, opset=opset))
        assert "trunc_node" in msg and "broadcast" in msg
    inputs = [np.ones((2, 3), F32), F32(1), F32(0), F32(8), np.ones(2, F32), np.ones(3, F32)]
    msg = _error(_v1_model(inputs=inputs, opset=2))
    assert "trunc_node" in msg and "broadcast" in msg


def test_wrong_input_count():
    x = np.ones(3, F32)
    msg = _error(_v1_model(inputs=[x, F32(1), F32(0), F32(8)]), session=_plain_session)
    assert "trunc_node" in msg and "input size" in msg
    msg = _error(_v1_model(inputs=[x, F32(1), F32(0), F32(8), F32(1), F32(4), F32(4)], opset=2), session=_plain_session)
    assert "trunc_node" in msg and "input size" in msg


def test_input_count_contradicting_the_opset_is_refused_by_prepare_model():
    x = np.ones(3, F32)
    for inputs, opset in (([x, F32(1), F32(0), F32(8), F32(1), F32(4)], 1), ([x, F32(1), F32(0), F32(8), F32(4)], 2)):
        model, _ = _v1_model(inputs=inputs, opset=opset)
        with pytest.raises(ortquant._session.ModelError) as e:
            ortquant.prepare_model(model)
        assert "trunc_node" in str(e.value) and f"opset {opset}" in str(e.value)


def _plain_session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ortquant.register(so)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


# ---- against qonnx -----------------------------------------------------------------------------------------

try:
    from qonnx.custom_op.general.trunc import trunc_v1 as qonnx_trunc_v1
    from qonnx.custom_op.general.trunc import trunc_v2 as qonnx_trunc_v2
    from qonnx.custom_op.registry import getCustomOp
except Exception:  # pragma: no cover - qonnx not installed
    qonnx_trunc_v1 = None


needs_qonnx = pytest.mark.skipif(qonnx_trunc_v1 is None, reason="qonnx not installed")


@needs_qonnx
@pytest.mark.parametrize("mode", QONNX_MODES)
def test_v1_against_qonnx(mode, rng):
    x = _inputs(rng)
    for (bi, bo), (s, z) in itertools.product(V1_BITWIDTHS, SCALES):
        for as_int in (False, True):
            if as_int and not (float(bi).is_integer() and float(bo).is_integer()):
                continue
            a, b = _bw(bi, as_int), _bw(bo, as_int)
            with np.errstate(all="ignore"):
                want = np.asarray(qonnx_trunc_v1(x, s, z, a, b, mode)).astype(F32)
            assert_bitexact(kernels.trunc(x, s, z, a, b, rounding_mode=mode), want)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(F32)
    z = rng.integers(-2, 3, (1, 3, 1, 1)).astype(F32)
    bo = np.array([2, 3, 4], F32).reshape(1, 3, 1, 1)
    want = np.asarray(qonnx_trunc_v1(x, s, z, F32(8), bo, mode)).astype(F32)
    (got,) = run_node("Trunc", DOMAINS[0], [x, s, z, F32(8), bo], attrs={"rounding_mode": mode.lower()})
    assert_bitexact(got, want)


@needs_qonnx
@pytest.mark.parametrize("mode", QONNX_MODES)
def test_v2_against_qonnx(mode, rng):
    x = _inputs(rng, mag=200)
    for signed, narrow in itertools.product([1, 0], [0, 1]):
        for bo, ratio, z in itertools.product(V2_BITWIDTHS, [0.25, 1, 2, 8, 3, 0.7], [F32(0), F32(2)]):
            s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(F32)
            os_ = (s * F32(ratio)).astype(F32)
            for as_int in (False, True):
                if as_int and not float(bo).is_integer():
                    continue
                b = _bw(bo, as_int)
                with np.errstate(over="ignore"):  # qonnx's int32 max_int wraps at 31 bits (harmlessly here)
                    want = np.asarray(qonnx_trunc_v2(x, s, z, F32(16), narrow, signed, os_, b, mode)).astype(F32)
                got = kernels.trunc(
                    x, s, z, F32(16), b, out_scale=os_, signed=signed, narrow=narrow, rounding_mode=mode
                )
                assert_bitexact(got, want)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(F32)
    os_ = (s * np.array([0.5, 2, 4], F32).reshape(1, 3, 1, 1)).astype(F32)
    bo = np.array([2, 3, 4], F32).reshape(1, 3, 1, 1)
    want = np.asarray(qonnx_trunc_v2(x, s, F32(1), F32(8), 0, 1, os_, bo, mode)).astype(F32)
    (got,) = run_node("TruncQuant", DOMAINS[0], [x, s, F32(1), F32(8), os_, bo], opset=2, attrs={"rounding_mode": mode})
    assert_bitexact(got, want)


@needs_qonnx
def test_special_values_and_scales_against_qonnx():
    x = np.repeat(SPECIAL_F32, 6)
    s = np.tile(np.array([0.5, 0.0, -0.25, np.inf, np.nan, 1e-45], F32), SPECIAL_F32.size)
    with np.errstate(all="ignore"):
        want = np.asarray(qonnx_trunc_v1(x, s, F32(0), F32(8), F32(3), "FLOOR")).astype(F32)
        assert_bitexact(kernels.trunc(x, s, F32(0), F32(8), F32(3)), want)
        for os_ in (F32(2), F32(0), F32(-1), F32(np.inf)):
            want = np.asarray(qonnx_trunc_v2(x, s, F32(0), F32(8), 0, 1, os_, F32(3), "FLOOR")).astype(F32)
            assert_bitexact(kernels.trunc(x, s, F32(0), F32(8), F32(3), out_scale=os_), want)


@needs_qonnx
@pytest.mark.parametrize("opset", [1, 2, 3])
def test_against_qonnx_execute_node(opset, rng):
    inputs = _v1_inputs(rng) if opset == 1 else _v2_inputs(rng)
    attrs = {"rounding_mode": "half_up"} if opset == 1 else {"rounding_mode": "ceil", "signed": 1, "narrow": 1}
    model, feeds = make_node_model("Trunc", DOMAINS[0], inputs, attrs=attrs, opset=opset)
    node = model.graph.node[0]
    ctx = {f"in{i}": np.asarray(a) for i, a in enumerate(inputs)}
    getCustomOp(node, onnx_opset_version=opset).execute_node(ctx, model.graph)
    (got,) = run_model(model, feeds)
    assert_bitexact(got, np.asarray(ctx[node.output[0]]).astype(F32))


def _exact_pow2_exponent(r: float) -> int:
    """The nearest integer to log2(r) for a positive float, from exact rational arithmetic."""
    k = math.floor(math.log2(r))
    while Fraction(2) ** k > Fraction(r):
        k -= 1
    while Fraction(2) ** (k + 1) <= Fraction(r):
        k += 1
    return k + 1 if Fraction(r) ** 2 > Fraction(2) ** (2 * k + 1) else k


@needs_qonnx
def test_v2_power_of_two_is_exact_near_sqrt2_boundaries():
    """t = 2^round(log2(out_scale/scale)) uses the exact nearest exponent; qonnx's float32 log2 can round a ratio
    a few ulps from 2^k*sqrt(2) to k + 0.5 and then ties to even. That is the only place where we differ."""
    x = np.array([1000.0], F32)
    differ = 0
    for k in range(-20, 21):
        c = F32(math.sqrt(2) * 2.0**k)
        cands = [c]
        lo = hi = c
        for _ in range(3):
            lo, hi = np.nextafter(lo, F32(0)), np.nextafter(hi, F32(np.inf))
            cands += [lo, hi]
        for os_ in cands:
            os_ = F32(os_)
            e = _exact_pow2_exponent(float(os_))
            # y = floor(1000 / 2^e) * out_scale with the exact exponent (no clamp at 31 bits)
            want = F32(math.floor(Fraction(1000) / Fraction(2) ** e)) * os_
            got = kernels.trunc(x, F32(1), F32(0), F32(8), F32(31), out_scale=os_)
            assert_bitexact(got, np.array([want], F32))
            q = np.asarray(qonnx_trunc_v2(x, F32(1), F32(0), F32(8), 0, 1, os_, F32(31), "FLOOR")).astype(F32)
            differ += int(q[0] != got[0])
    assert differ > 0  # qonnx's float32 log2 does round some of these differently
