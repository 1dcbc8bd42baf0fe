"""QONNX BipolarQuant: C++ (through onnxruntime and through ortquant._C on every ISA) vs the numpy reference,
and vs qonnx itself."""

from __future__ import annotations

import numpy as np
import pytest

import ortquant
from conftest import SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx_elementwise as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
SPECIAL_SCALES = np.array([0.25, 1.0, 0.0, -0.0, -0.5, np.inf, -np.inf, np.nan, 1e-45, 3e38], np.float32)


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _inputs(rng: np.random.Generator, shape=(2, 3, 4, 5)) -> np.ndarray:
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    flat[: SPECIAL_F32.size] = SPECIAL_F32
    flat[SPECIAL_F32.size : SPECIAL_F32.size + 4] = [-1e-45, 1e-45, -1e-38, np.float32(-0.0)]
    return x


def test_kernels_match_reference_with_special_values(isa, rng):
    x = _inputs(rng, (7, 37))  # rows longer than a vector plus a tail
    for s in SPECIAL_SCALES:
        assert_bitexact(kernels.bipolar_quant(x, s), ref.bipolar_quant(x, s))
    # every special scale against every special input, element by element
    xs = np.repeat(SPECIAL_F32, SPECIAL_SCALES.size)
    ss = np.tile(SPECIAL_SCALES, SPECIAL_F32.size)
    assert_bitexact(kernels.bipolar_quant(xs, ss), ref.bipolar_quant(xs, ss))


def test_sign_rules(isa):
    """-0 gives +1, NaN gives -1: the comparison x >= 0, on X itself (not X / scale)."""
    x = np.array([-0.0, 0.0, np.nan, -np.nan, 1e-45, -1e-45, np.inf, -np.inf], np.float32)
    got = kernels.bipolar_quant(x, np.float32(0.5))
    assert_bitexact(got, np.array([0.5, 0.5, -0.5, -0.5, 0.5, -0.5, 0.5, -0.5], np.float32))
    got = kernels.bipolar_quant(x, np.float32(-2))
    assert_bitexact(got, np.array([-2, -2, 2, 2, -2, 2, -2, 2], np.float32))


def test_kernels_per_channel_and_broadcast(isa, rng):
    x = _inputs(rng, (3, 4, 5, 6))
    for shape in [(1, 4, 1, 1), (3, 1, 1, 1), (6,), (5, 1), (1, 1, 5, 6), (2, 3, 4, 5, 6), (), (1,), (3, 4, 5, 6)]:
        s = rng.uniform(0.1, 2, shape).astype(np.float32)
        assert_bitexact(kernels.bipolar_quant(x, s), ref.bipolar_quant(x, s))
    # x smaller than scale along the innermost dim (x broadcast)
    x1 = np.array([[-1.0], [0.0], [np.nan]], np.float32)
    s = rng.uniform(0.1, 2, (3, 40)).astype(np.float32)
    assert_bitexact(kernels.bipolar_quant(x1, s), ref.bipolar_quant(x1, s))
    assert kernels.bipolar_quant(np.zeros((0, 3), np.float32), np.float32(1)).shape == (0, 3)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("const", [False, True])
def test_ort_matches_reference(domain, const, rng):
    x = _inputs(rng)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(np.float32)
    (y,) = run_node("BipolarQuant", domain, [x, s], const=[False, const])
    assert_bitexact(y, ref.bipolar_quant(x, s))


def test_ort_runtime_scale_and_threads(rng):
    x = (rng.standard_normal((4, 64, 32, 32)) * 3).astype(np.float32)
    s = rng.uniform(0.05, 1.0, (1, 64, 1, 1)).astype(np.float32)
    for threads in (1, 2):
        (y,) = run_node("BipolarQuant", DOMAINS[0], [x, s], threads=threads)
        assert_bitexact(y, ref.bipolar_quant(x, s))


def test_constant_node_is_folded_and_exact(rng):
    """All-constant BipolarQuant (a binary weight quantizer) is computed once at session creation (decision 18)."""
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    s = rng.uniform(0.01, 0.1, (8, 1, 1, 1)).astype(np.float32)
    model, _ = make_node_model("BipolarQuant", DOMAINS[0], [w, s], const=True)
    sess = ortquant.InferenceSession(model)
    for _ in range(3):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.bipolar_quant(w, s))


def test_zero_and_negative_scale_follow_qonnx():
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.nan], np.float32)
    for s in (np.float32(0.0), np.float32(-0.0), np.float32(-0.5), np.float32(np.inf)):
        (y,) = run_node("BipolarQuant", DOMAINS[0], [x, s])
        assert_bitexact(y, ref.bipolar_quant(x, s))


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_wrong_dtype_is_refused():
    msg = _error(make_node_model("BipolarQuant", DOMAINS[0], [np.ones(3, np.float32), np.int32(1)]))
    assert "bipolarquant_node" in msg and "int32" in msg


def test_unbroadcastable_shapes():
    msg = _error(make_node_model("BipolarQuant", DOMAINS[0], [np.ones((2, 3), np.float32), np.ones(4, np.float32)]))
    assert "bipolarquant_node" in msg and "broadcast" in msg


@pytest.mark.parametrize("n_inputs", [1, 3])
def test_wrong_input_count(n_inputs):
    inputs = [np.ones(3, np.float32)] + [np.float32(1)] * (n_inputs - 1)
    msg = _error(make_node_model("BipolarQuant", DOMAINS[0], inputs))
    assert "bipolarquant_node" in msg and "input size" in msg


try:
    from qonnx.custom_op.general.bipolar_quant import binary_quant as qonnx_binary_quant
    from qonnx.custom_op.registry import getCustomOp
except Exception:  # pragma: no cover - qonnx not installed
    qonnx_binary_quant = None


@pytest.mark.skipif(qonnx_binary_quant is None, reason="qonnx not installed")
def test_against_qonnx_function(rng):
    x = _inputs(rng)
    for shape in [(), (1, 3, 1, 1), (5,), (4, 1)]:
        s = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        want = np.asarray(qonnx_binary_quant(x, s))
        (got,) = run_node("BipolarQuant", DOMAINS[0], [x, s])
        assert_bitexact(got, want)
        assert_bitexact(kernels.bipolar_quant(x, s), want)
    xs = np.repeat(SPECIAL_F32, SPECIAL_SCALES.size)
    ss = np.tile(SPECIAL_SCALES, SPECIAL_F32.size)
    with np.errstate(all="ignore"):
        assert_bitexact(kernels.bipolar_quant(xs, ss), np.asarray(qonnx_binary_quant(xs, ss)))


@pytest.mark.skipif(qonnx_binary_quant is None, reason="qonnx not installed")
def test_against_qonnx_execute_node(rng):
    x = _inputs(rng)
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(np.float32)
    model, feeds = make_node_model("BipolarQuant", DOMAINS[0], [x, s])
    node = model.graph.node[0]
    ctx = {"in0": x, "in1": s}
    getCustomOp(node).execute_node(ctx, model.graph)
    (got,) = run_model(model, feeds)
    assert_bitexact(got, ctx[node.output[0]])
