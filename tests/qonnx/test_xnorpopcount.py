"""QONNX XnorPopcountMatMul: C++ (through onnxruntime and ortquant._C on every ISA) vs the numpy reference and
vs qonnx 1.0.0."""

from __future__ import annotations

import numpy as np
import pytest
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx_structural as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
OP = "XnorPopcountMatMul"


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _bits(rng: np.random.Generator, shape: tuple[int, ...], p: float = 0.5) -> np.ndarray:
    """Random 0/1 float32 values; some zeros are -0.0 (still the bit 0)."""
    b = (rng.random(shape) < p).astype(np.float32)
    b[(b == 0) & (rng.random(shape) < 0.3)] = -0.0
    return b


@pytest.mark.parametrize("k", [1, 2, 63, 64, 65, 127, 128, 129, 1000])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 17])
def test_kernels_match_reference(isa, k, n, rng):
    for a_shape in [(k,), (7, k), (2, 3, k), (2, 1, 3, k)]:
        a = _bits(rng, a_shape)
        b = _bits(rng, (k, n))
        assert_bitexact(kernels.xnor_popcount_matmul(a, b), ref.xnor_popcount_matmul(a, b))


def test_kernels_extremes(isa):
    """All agree -> K, all disagree -> 0."""
    k = 130
    ones = np.ones((3, k), np.float32)
    zeros = np.zeros((k, 2), np.float32)
    assert_bitexact(kernels.xnor_popcount_matmul(ones, np.ones((k, 2), np.float32)), np.full((3, 2), k, np.float32))
    assert_bitexact(kernels.xnor_popcount_matmul(ones, zeros), np.zeros((3, 2), np.float32))
    assert_bitexact(kernels.xnor_popcount_matmul(-ones * 0, zeros), np.full((3, 2), k, np.float32))


@pytest.mark.parametrize("col", [0, 15, 16, 63, 64, 130, 199])
def test_kernels_reject_non_binary_anywhere(isa, col, rng):
    """A non-binary value is found in the vector-packed words and in the tail."""
    b = _bits(rng, (200, 3))
    for bad in (2.0, -1.0, np.nan, np.inf, 1e-45):
        a = _bits(rng, (3, 200))
        a[2, col] = bad
        with pytest.raises(ValueError, match=f"row 2, column {col}"):
            kernels.xnor_popcount_matmul(a, b)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("const", [False, True])
def test_ort_matches_reference(domain, const, rng):
    a = _bits(rng, (4, 5, 100))
    b = _bits(rng, (100, 9))
    (y,) = run_node(OP, domain, [a, b], const=[False, const])
    assert_bitexact(y, ref.xnor_popcount_matmul(a, b))


def test_ort_large_parallel(rng):
    a = _bits(rng, (512, 300))
    b = _bits(rng, (300, 64))
    for threads in (1, 2):
        (y,) = run_node(OP, DOMAINS[0], [a, b], const=[False, True], threads=threads)
        assert_bitexact(y, ref.xnor_popcount_matmul(a, b))


def test_constant_node_is_folded_and_exact(rng):
    a = _bits(rng, (3, 70))
    b = _bits(rng, (70, 5))
    model, _ = make_node_model(OP, DOMAINS[0], [a, b], const=True)
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.xnor_popcount_matmul(a, b))


def test_empty_shapes(rng):
    (y,) = run_node(OP, DOMAINS[0], [np.zeros((0, 8), np.float32), _bits(rng, (8, 3))])
    assert y.shape == (0, 3) and y.dtype == np.float32
    (y,) = run_node(OP, DOMAINS[0], [_bits(rng, (2, 8)), np.zeros((8, 0), np.float32)])
    assert y.shape == (2, 0)
    (y,) = run_node(OP, DOMAINS[0], [np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)])
    assert_bitexact(y, np.zeros((2, 3), np.float32))


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("a_shape,n", [((6, 37), 5), ((2, 3, 64), 8), ((128,), 3), ((1, 200), 130)])
def test_against_qonnx(a_shape, n, rng):
    a = _bits(rng, a_shape)
    b = _bits(rng, (a_shape[-1], n))
    want = qonnx_execute(qonnx_node(OP, 2), [a, b])
    assert want.dtype == np.float32
    (got,) = run_node(OP, DOMAINS[0], [a, b], const=[False, True])
    assert_bitexact(got, want)


# ---- bad input ------------------------------------------------------------------------------------------


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_non_binary_a_is_a_runtime_error(rng):
    b = _bits(rng, (16, 4))
    for bad in (2.0, -1.0, 0.5, np.nan):
        a = _bits(rng, (3, 16))
        a[1, 7] = bad
        msg = _error(make_node_model(OP, DOMAINS[0], [a, b], const=[False, True]))
        assert "xnorpopcountmatmul_node" in msg and "input A" in msg and "row 1, column 7" in msg


def test_non_binary_constant_b_fails_at_session_creation(rng):
    b = _bits(rng, (16, 4))
    b[3, 2] = -1.0
    model, _ = make_node_model(OP, DOMAINS[0], [_bits(rng, (3, 16)), b], const=[False, True])
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert "xnorpopcountmatmul_node" in str(e.value) and "input B" in str(e.value) and "-1" in str(e.value)


def test_shape_errors(rng):
    msg = _error(make_node_model(OP, DOMAINS[0], [_bits(rng, (3, 16)), _bits(rng, (15, 4))]))
    assert "xnorpopcountmatmul_node" in msg and "15 rows" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [_bits(rng, (3, 16)), _bits(rng, (1, 16, 4))], const=[False, True]))
    assert "xnorpopcountmatmul_node" in msg and "2-D" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [np.float32(1), _bits(rng, (1, 4))]))
    assert "xnorpopcountmatmul_node" in msg and "at least one dimension" in msg


def test_wrong_dtype_and_input_count(rng):
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((2, 4)), _bits(rng, (4, 2))]))
    assert "xnorpopcountmatmul_node" in msg and "double" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [_bits(rng, (2, 4))]))
    assert "xnorpopcountmatmul_node" in msg
