"""QONNX Quant / IntQuant: C++ (through onnxruntime and through ortquant._C on every ISA) vs the numpy reference,
and vs qonnx itself when it is installed."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest

import ortquant
from conftest import ORT_ERRORS, SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
MODES = list(ref.ROUNDING_MODES)
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest


def _inputs(rng: np.random.Generator, shape=(2, 3, 4, 5)) -> np.ndarray:
    x = (rng.standard_normal(shape) * 40).astype(np.float32)
    flat = x.reshape(-1)
    flat[: SPECIAL_F32.size] = SPECIAL_F32
    # Exact ties at scale 0.5: x/scale lands on .5
    flat[SPECIAL_F32.size : SPECIAL_F32.size + 10] = np.arange(10, dtype=np.float32) * 0.5 + 0.25
    return x


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("signed,narrow", list(itertools.product([True, False], [True, False])))
def test_kernels_match_reference_all_bitwidths(isa, mode, signed, narrow, rng):
    x = _inputs(rng)
    for bw in [*range(1, 33), 0.5, 1.5, 2.5, 7.3, 24.9]:
        for scale, zp in [(np.float32(0.5), np.float32(0)), (np.float32(0.37), np.float32(3))]:
            b = np.float32(bw)
            got = kernels.quant(x, scale, zp, b, signed, narrow, mode)
            want = ref.quant(x, scale, zp, b, signed, narrow, mode)
            assert_bitexact(got, want)
            if float(bw).is_integer():
                bi = np.int32(bw)
                assert_bitexact(
                    kernels.quant(x, scale, zp, bi, signed, narrow, mode),
                    ref.quant(x, scale, zp, bi, signed, narrow, mode),
                )


@pytest.mark.parametrize("mode", MODES)
def test_kernels_per_channel_and_broadcast(isa, mode, rng):
    x = _inputs(rng, (3, 4, 5, 6))
    cases = [
        (rng.uniform(0.1, 2, (1, 4, 1, 1)), rng.integers(-3, 3, (1, 4, 1, 1))),  # per-channel activation
        (rng.uniform(0.1, 2, (3, 1, 1, 1)), np.zeros((), np.float32)),  # per-output-channel weight
        (rng.uniform(0.1, 2, (6,)), rng.integers(-2, 2, (5, 1))),  # mixed broadcast
        (rng.uniform(0.1, 2, (1, 1, 5, 6)), np.float32(1)),
        (rng.uniform(0.1, 2, (2, 3, 4, 5, 6)), np.float32(0)),  # params of higher rank than x
    ]
    for s, z in cases:
        s = s.astype(np.float32)
        z = np.asarray(z, np.float32)
        got = kernels.quant(x, s, z, np.float32(4), True, False, mode)
        assert_bitexact(got, ref.quant(x, s, z, np.float32(4), True, False, mode))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("op", ["Quant", "IntQuant"])
@pytest.mark.parametrize("const", [False, True])
def test_ort_matches_reference(domain, op, const, rng):
    x = _inputs(rng)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(np.float32)
    z = np.float32(0)
    b = np.float32(6)
    attrs = {"signed": 1, "narrow": 0, "rounding_mode": "HALF_UP"}
    (y,) = run_node(op, domain, [x, s, z, b], const=[const, True, True, True], attrs=attrs)
    assert_bitexact(y, ref.quant(x, s, z, b, True, False, "HALF_UP"))


def test_ort_runtime_parameters_and_threads(rng):
    x = (rng.standard_normal((4, 64, 32, 32)) * 3).astype(np.float32)
    s = rng.uniform(0.05, 1.0, (1, 64, 1, 1)).astype(np.float32)
    z = np.zeros((1, 64, 1, 1), np.float32)
    b = np.int32(5)
    for threads in (1, 2):
        (y,) = run_node("Quant", DOMAINS[0], [x, s, z, b], attrs={"signed": 0, "narrow": 1}, threads=threads)
        assert_bitexact(y, ref.quant(x, s, z, b, False, True, "ROUND"))


def test_missing_signed_narrow_defaults(rng):
    """qonnx requires both attributes; ortquant defaults signed=1, narrow=0 (decision 5)."""
    x = _inputs(rng)
    (y,) = run_node("Quant", DOMAINS[0], [x, np.float32(0.25), np.float32(0), np.float32(3)])
    assert_bitexact(y, ref.quant(x, np.float32(0.25), np.float32(0), np.float32(3), True, False, "ROUND"))


def test_zero_and_negative_scale_follow_qonnx():
    x = np.array([-1.0, 0.0, 1.0, 2.0], np.float32)
    for s in (np.float32(0.0), np.float32(-0.5)):
        (y,) = run_node("Quant", DOMAINS[0], [x, s, np.float32(0), np.float32(8)])
        with np.errstate(all="ignore"):
            assert_bitexact(y, ref.quant(x, s, np.float32(0), np.float32(8)))


def _session_error(model) -> str:
    with pytest.raises(ORT_ERRORS) as e:
        run_model(*model)
    return str(e.value)


def test_bad_rounding_mode_fails_at_session_creation():
    model, feeds = make_node_model(
        "Quant",
        DOMAINS[0],
        [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)],
        attrs={"rounding_mode": "SIDEWAYS"},
    )
    msg = _session_error((model, feeds))
    assert "quant_node" in msg and "rounding_mode" in msg and "SIDEWAYS" in msg


def test_bad_signed_attribute():
    model, feeds = make_node_model(
        "Quant", DOMAINS[0], [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)], attrs={"signed": 2}
    )
    msg = _session_error((model, feeds))
    assert "quant_node" in msg and "'signed'" in msg


def test_wrong_attribute_type():
    model, feeds = make_node_model(
        "Quant",
        DOMAINS[0],
        [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)],
        attrs={"narrow": "yes"},
    )
    msg = _session_error((model, feeds))
    assert "quant_node" in msg and "'narrow'" in msg


def test_wrong_dtype_is_refused():
    # float64 X is accepted (tests/qonnx/test_wide_params.py); an integer X is not a Quant input
    model, feeds = make_node_model(
        "Quant", DOMAINS[0], [np.ones(3, np.int32), np.float32(1), np.float32(0), np.float32(8)]
    )
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    assert "quant_node" in str(e.value) and "int32" in str(e.value)


def test_bad_bitwidth_dtype_and_value():
    x = np.ones(3, np.float32)
    for b, words in [
        (np.int16(8), "bitwidth"),  # int64 and float64 are accepted (test_wide_params.py)
        (np.float32(0), "bitwidth"),
        (np.array([8, 8], np.float32), "bitwidth"),
    ]:
        model, feeds = make_node_model("Quant", DOMAINS[0], [x, np.float32(1), np.float32(0), b])
        with pytest.raises(ORT_ERRORS) as e:
            run_model(model, feeds)
        assert "quant_node" in str(e.value) and words in str(e.value)


def test_unbroadcastable_shapes():
    model, feeds = make_node_model(
        "Quant", DOMAINS[0], [np.ones((2, 3), np.float32), np.ones(4, np.float32), np.float32(0), np.float32(8)]
    )
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    assert "quant_node" in str(e.value) and "broadcast" in str(e.value)


def test_wrong_input_count():
    model, feeds = make_node_model("Quant", DOMAINS[0], [np.ones(3, np.float32), np.float32(1), np.float32(0)])
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    assert "quant_node" in str(e.value)


def test_constant_node_is_folded_and_exact(rng):
    """All-constant Quant (a weight quantizer) is computed once at session creation (decision 18)."""
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    s = rng.uniform(0.01, 0.1, (8, 1, 1, 1)).astype(np.float32)
    model, _ = make_node_model(
        "Quant", DOMAINS[0], [w, s, np.float32(0), np.float32(4)], const=True, attrs={"signed": 1, "narrow": 1}
    )
    so = ort.SessionOptions()
    sess = ortquant.InferenceSession(model, sess_options=so)
    for _ in range(3):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.quant(w, s, np.float32(0), np.float32(4), True, True))


try:
    from qonnx.custom_op.general.intquant import int_quant as qonnx_int_quant
except Exception:  # pragma: no cover - qonnx not installed
    qonnx_int_quant = None


@pytest.mark.skipif(qonnx_int_quant is None, reason="qonnx not installed")
@pytest.mark.parametrize("mode", ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"])
def test_against_qonnx(mode, rng):
    x = _inputs(rng)
    for signed, narrow, bw in itertools.product([1, 0], [0, 1], [1.0, 2.0, 4.0, 8.0, 2.5, 16.0, 31.0]):
        s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(np.float32)
        z = np.float32(0) if signed else np.float32(2)
        b = np.float32(bw)
        want = np.asarray(qonnx_int_quant(x, s, z, b, signed, narrow, mode)).astype(np.float32)
        (got,) = run_node(
            "Quant", DOMAINS[0], [x, s, z, b], attrs={"signed": signed, "narrow": narrow, "rounding_mode": mode}
        )
        assert_bitexact(got, want)
