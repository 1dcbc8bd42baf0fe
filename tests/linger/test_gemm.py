"""The int8 GEMM engine (csrc/core/gemm) on every kernel path this CPU runs: bit-exact against the scalar oracle
and against the numpy int64 reference, for awkward shapes, extreme values, every output kind and the rounding
ties of the luna epilogue."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import KERNELS, int8_data

from conftest import assert_bitexact
from ortquant import _C
from ortquant.reference import linger_matrix as ref

# (M, N, K): 1x1, primes, K % 4 != 0, N not a multiple of the 64-lane panel / 16 / 8, M not a multiple of 6.
SHAPES = [
    (1, 1, 1),
    (1, 1, 7),
    (2, 3, 5),
    (7, 13, 17),
    (6, 64, 4),
    (5, 65, 3),
    (13, 67, 131),
    (12, 128, 256),
    (31, 37, 61),
    (1, 1024, 1024),
    (64, 100, 36),
    (3, 200, 1001),
    (6, 8, 33),  # 8 weight rows: the 8-lane rows kernel, 6 activation rows per pass
    (11, 9, 40),
    (17, 24, 12),
    (19, 9, 2),
]

KINDS = ["int8", "int16", "int32", "float", "raw"]


def _epilogue(kind: str, ratio: float) -> dict:
    if kind == "int8":
        return dict(kind=kind, ratio=ratio, lo=-128.0, hi=127.0)
    if kind == "int16":
        return dict(kind=kind, ratio=ratio, lo=-32768.0, hi=32767.0)
    if kind == "int32":
        return dict(kind=kind, ratio=ratio, lo=-(2.0**31), hi=2.0**31 - 1)
    if kind == "float":
        return dict(kind=kind, fscale=ratio)
    return dict(kind=kind)


def _expected(acc: np.ndarray, kind: str, ratio: float) -> np.ndarray:
    """Independent expectation from the exact int64 sums (bias already added, except for raw)."""
    if kind == "raw":
        return acc.astype(np.int32)
    v = acc.astype(np.float64)
    if kind == "float":
        return (v * ratio).astype(np.float32)
    e = _epilogue(kind, ratio)
    return np.clip(np.floor(v * ratio + 0.5), e["lo"], e["hi"]).astype(
        {"int8": np.int8, "int16": np.int16, "int32": np.int32}[kind]
    )


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_rows_match_reference(kernel, m, n, k, rng):
    a = int8_data(rng, (m, k), extreme=0.2)
    w = int8_data(rng, (n, k), extreme=0.2)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    packed = _C.PackedGemmRows(w)
    acc = ref.linear_acc(a, w)
    for kind in KINDS:
        for ratio in (2.0**-6, 2.0**-13, 0.3):
            b = None if kind == "raw" else bias
            got = packed.run(a, b, kernel=kernel, **_epilogue(kind, ratio))
            want = _expected(acc if b is None else acc + bias, kind, ratio)
            assert_bitexact(got, want)
            if kernel != "scalar":
                assert_bitexact(got, packed.run(a, b, kernel="scalar", **_epilogue(kind, ratio)))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_cols_match_reference(kernel, m, n, k, rng):
    # The convolution orientation: out[i, p] = sum_k w[i, k] x[k, p]; here i < n weight rows, p < m pixels.
    w = int8_data(rng, (n, k), extreme=0.2)
    x = int8_data(rng, (k, m), extreme=0.2)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    acc = np.asarray(w, np.int64) @ np.asarray(x, np.int64)
    for kind in KINDS:
        ratio = 2.0**-7
        b = None if kind == "raw" else bias
        got = _C.gemm_cols(w, x, b, kernel=kernel, **_epilogue(kind, ratio))
        want = _expected(acc if b is None else acc + bias[:, None], kind, ratio)
        assert_bitexact(got, want)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_cols_without_minus_128_weights(kernel, m, n, k, rng):
    # Weights in [-127, 127] take the AVX2 vpmaddubsw cols kernel (|x| * (w * sign x), no saturation possible);
    # activations keep their extremes (-128 included).
    w = np.maximum(int8_data(rng, (n, k), extreme=0.3), -127).astype(np.int8)
    x = int8_data(rng, (k, m), extreme=0.3)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    acc = np.asarray(w, np.int64) @ np.asarray(x, np.int64)
    for kind in KINDS:
        b = None if kind == "raw" else bias
        got = _C.gemm_cols(w, x, b, kernel=kernel, **_epilogue(kind, 2.0**-7))
        assert_bitexact(got, _expected(acc if b is None else acc + bias[:, None], kind, 2.0**-7))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_rows_without_minus_128_weights(kernel, m, n, k, rng):
    # Weights in [-127, 127] take the AVX2 vpmaddubsw rows kernel; activations keep their extremes.
    a = int8_data(rng, (m, k), extreme=0.3)
    w = np.maximum(int8_data(rng, (n, k), extreme=0.3), -127).astype(np.int8)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    packed = _C.PackedGemmRows(w)
    acc = ref.linear_acc(a, w)
    for kind in KINDS:
        for ratio in (2.0**-6, 0.3):
            b = None if kind == "raw" else bias
            got = packed.run(a, b, kernel=kernel, **_epilogue(kind, ratio))
            assert_bitexact(got, _expected(acc if b is None else acc + bias, kind, ratio))


@pytest.mark.parametrize("kernel", KERNELS)
def test_cols_extreme_sums_without_minus_128(kernel):
    # The largest pair products of the vpmaddubsw kernel: |x| = 128 (x = -128) times w = +-127 everywhere.
    k = 131071
    x = np.full((k, 3), -128, np.int8)
    x[::2, 1] = 127
    w = np.full((4, k), 127, np.int8)
    w[1] = -127
    w[2, 1::3] = -127
    w[3, ::5] = 0
    acc = np.asarray(w, np.int64) @ np.asarray(x, np.int64)
    assert np.abs(acc).max() == 128 * 127 * k
    assert_bitexact(_C.gemm_cols(w, x, kind="raw", kernel=kernel), acc.astype(np.int32))
    got = _C.PackedGemmRows(w).run(np.ascontiguousarray(x.T), kind="raw", kernel=kernel)
    assert_bitexact(got, acc.T.astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
def test_extreme_sums(kernel):
    # -128 * -128 everywhere, at the longest reduction the int32 accumulator holds exactly (and +-127 mixes).
    k = 131071
    a = np.full((2, k), -128, np.int8)
    a[1, ::2] = 127
    w = np.full((3, k), -128, np.int8)
    w[2, 1::3] = 127
    acc = ref.linear_acc(a, w)
    assert acc.max() == 16384 * k  # 2^31 - 16384: the largest possible sum
    got = _C.PackedGemmRows(w).run(a, kind="raw", kernel=kernel)
    assert_bitexact(got, acc.astype(np.int32))
    got = _C.gemm_cols(w, np.ascontiguousarray(a.T), kind="raw", kernel=kernel)
    assert_bitexact(got, acc.T.astype(np.int32))
    # Saturation at both ends and an exact int32 output.
    assert_bitexact(
        _C.PackedGemmRows(w).run(a, kind="int8", ratio=1.0, kernel=kernel), np.clip(acc, -128, 127).astype(np.int8)
    )
    assert_bitexact(
        _C.PackedGemmRows(w).run(a, kind="int32", ratio=1.0, lo=-(2.0**31), hi=2.0**31 - 1, kernel=kernel),
        acc.astype(np.int32),
    )


def test_reduction_too_long_is_an_error():
    with pytest.raises(ValueError, match="131071"):
        _C.PackedGemmRows(np.zeros((1, 131072), np.int8))


@pytest.mark.parametrize("kernel", KERNELS)
def test_round_half_up_ties(kernel):
    # K = 1 and W = 1 make the sum the activation itself: floor(v/2 + 0.5) (linger.md: -3>>1 -> -1, 3>>1 -> 2,
    # -5>>1 -> -2); and floor(v/8 + 0.5): -12 -> -1, -4 -> 0, 4 -> 1, 12 -> 2.
    v = np.array([-3, -2, -1, 0, 1, 2, 3, 5, -5, -128, 127], np.int8)[:, None]
    w = np.ones((1, 1), np.int8)
    got = _C.PackedGemmRows(w).run(v, kind="int8", ratio=0.5, kernel=kernel)
    assert got[:, 0].tolist() == [-1, -1, 0, 0, 1, 1, 2, 3, -2, -64, 64]
    v8 = np.array([-12, -4, 4, 12, -20, 20], np.int8)[:, None]
    got = _C.PackedGemmRows(w).run(v8, kind="int8", ratio=0.125, kernel=kernel)
    assert got[:, 0].tolist() == [-1, 0, 1, 2, -2, 3]
    # A bias moves the tie: (1 + 2) / 2 = 1.5 -> 2.
    got = _C.PackedGemmRows(w).run(
        np.array([[1]], np.int8), np.array([2], np.int32), kind="int8", ratio=0.5, kernel=kernel
    )
    assert got.tolist() == [[2]]


@pytest.mark.parametrize("kernel", KERNELS)
def test_float_division_by_non_power_of_two(kernel, rng):
    a = int8_data(rng, (9, 33))
    w = int8_data(rng, (70, 33))
    bias = rng.integers(-1000, 1000, 70).astype(np.int32)
    got = _C.PackedGemmRows(w).run(a, bias, kind="float", fdiv=15.0, kernel=kernel)
    want = ((ref.linear_acc(a, w) + bias).astype(np.float64) / 15.0).astype(np.float32)
    assert_bitexact(got, want)


@pytest.mark.parametrize("kernel", KERNELS)
def test_threads_do_not_change_results(kernel, rng):
    a = int8_data(rng, (300, 260))
    w = int8_data(rng, (130, 260))
    packed = _C.PackedGemmRows(w)
    one = packed.run(a, kind="int8", ratio=2.0**-9, kernel=kernel)
    assert_bitexact(packed.run(a, kind="int8", ratio=2.0**-9, kernel=kernel, threads=3), one)


def test_kernel_names():
    assert "scalar" in _C.gemm_kernels()
    assert _C.gemm_kernel("scalar") == "scalar"
    with pytest.raises(ValueError, match="unknown GEMM kernel"):
        _C.gemm_kernel("sse9")


def test_proven_x_max():
    # The bound the AVX2 engine takes from the data (gemm::proven_x_max): -1 as soon as one value is negative.
    assert _C.gemm_proven_x_max(np.zeros((3, 5), np.int8)) == 0
    assert _C.gemm_proven_x_max(np.array([[0, 1, 4]], np.int8)) == 7
    assert _C.gemm_proven_x_max(np.array([[8], [3]], np.int8)) == 15
    assert _C.gemm_proven_x_max(np.full((2, 9), 127, np.int8)) == 127
    assert _C.gemm_proven_x_max(np.array([[64, 0]], np.int8)) == 127
    for where in (0, 4095, 4096, 9999):  # first block, block edge, a later block, the last value
        x = np.full((1, 10000), 5, np.int8)
        x[0, where] = -1
        assert _C.gemm_proven_x_max(x) == -1
    x = np.full((4, 3), 2, np.int8)
    x[3, 2] = -128  # the last row
    assert _C.gemm_proven_x_max(x) == -1


# Non-negative activations: every bound of proven_x_max, with the largest products of each (x = bound everywhere
# against w = -128 or 127 everywhere), and weights with and without -128.
NONNEG_BOUNDS = [1, 3, 15, 63, 127]


def _nonneg_operands(rng, shape_x, shape_w, bound, w_fill):
    x = rng.integers(0, bound + 1, shape_x, dtype=np.int8)
    x.reshape(-1)[:1] = bound
    if w_fill is None:
        w = int8_data(rng, shape_w, extreme=0.3)
    else:
        w = np.full(shape_w, w_fill, np.int8)
        x[...] = bound
    return x, w


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bound", NONNEG_BOUNDS)
@pytest.mark.parametrize("w_fill", [None, -128, 127])
@pytest.mark.parametrize("m,n,k", [(13, 67, 131), (6, 8, 1001), (19, 9, 2), (1, 1024, 1024), (64, 100, 36)])
def test_nonneg_activations(kernel, bound, w_fill, m, n, k, rng):
    # Both orientations: a [m, k] times W [n, k] (rows), and W times columns a^T (the convolutions' orientation).
    a, w = _nonneg_operands(rng, (m, k), (n, k), bound, w_fill)
    assert _C.gemm_proven_x_max(a) == bound
    acc = ref.linear_acc(a, w)
    packed = _C.PackedGemmRows(w)
    assert_bitexact(packed.run(a, kind="raw", kernel=kernel), acc.astype(np.int32))
    assert_bitexact(packed.run(a, kind="int8", ratio=2.0**-10, kernel=kernel), _expected(acc, "int8", 2.0**-10))
    cols = np.ascontiguousarray(a.T)
    assert_bitexact(_C.gemm_cols(w, cols, kind="raw", kernel=kernel), acc.T.astype(np.int32))
    e16 = dict(kind="int16", ratio=2.0**-3, lo=-32768.0, hi=32767.0)
    assert_bitexact(_C.gemm_cols(w, cols, kernel=kernel, **e16), _expected(acc, "int16", 2.0**-3).T)
    a[-1, -1] = -1  # one negative value: the sign (or widening) kernel, still exact
    acc = ref.linear_acc(a, w)
    assert_bitexact(packed.run(a, kind="raw", kernel=kernel), acc.astype(np.int32))
    assert_bitexact(_C.gemm_cols(w, np.ascontiguousarray(a.T), kind="raw", kernel=kernel), acc.T.astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("m,n,k", [(13, 67, 131), (6, 8, 33), (19, 9, 2)])
def test_power_of_two_ratios(kernel, m, n, k, rng):
    # Ratios 2^-s take the int32 shift epilogue (gemm::exact_shift) when sums + bias + rounding fit int32, in both
    # orientations and every integer kind; a bias near 2^31 must fall back to float64 with the same rule.
    a = int8_data(rng, (m, k), extreme=0.3)
    w = int8_data(rng, (n, k), extreme=0.3)
    packed = _C.PackedGemmRows(w)
    for shift, kind in [(0, "int32"), (1, "int8"), (7, "int16"), (12, "int8"), (30, "int32")]:
        for bmag in (5000, 2**31 - 1):
            bias = rng.integers(-bmag, bmag, n, endpoint=True).astype(np.int32)
            acc = ref.linear_acc(a, w, bias)
            e = _epilogue(kind, 2.0**-shift)
            assert_bitexact(packed.run(a, bias, kernel=kernel, **e), _expected(acc, kind, 2.0**-shift))
            got = _C.gemm_cols(w, np.ascontiguousarray(a.T), bias, kernel=kernel, **e)
            assert_bitexact(got, _expected(acc, kind, 2.0**-shift).T)


def test_biased_flush():
    # Weights with every |w| <= 64 let the AVX2 kernels multiply the packed bytes x + 128 directly (pair sums
    # <= 2 * 255 * |w|max < 2^15); the int16 sums then run for 32767 // (2 * 255 * |w|max) k-groups.
    def flush(wmax: int) -> int:
        w = np.zeros((3, 9), np.int8)
        w[1, 4] = wmax
        return _C.gemm_biased_flush(w)

    assert flush(0) == 1 << 20
    assert flush(1) == 64
    assert flush(8) == 8
    assert flush(9) == 7
    assert flush(32) == 2
    assert flush(33) == 1
    assert flush(64) == 1
    assert flush(-64) == 1
    assert flush(65) == 0
    assert flush(-65) == 0
    assert flush(-128) == 0
    assert flush(127) == 0


# Weight bounds around the biased kernels' limits: 1 (64 k-groups per widening), 8 (8), 32 / 33 (2 / 1), 64 (the
# last bound without the sign step) and 65 (the sign kernel again).
NARROW_BOUNDS = [1, 7, 8, 9, 32, 33, 64, 65]
NARROW_SHAPES = [(13, 67, 131), (6, 8, 1001), (19, 9, 2), (1, 130, 1027), (64, 100, 36), (7, 13, 17), (2, 3, 5)]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bound", NARROW_BOUNDS)
@pytest.mark.parametrize("m,n,k", NARROW_SHAPES)
def test_narrow_weights_signed_activations(kernel, bound, m, n, k, rng):
    # Signed activations (with -128 and 127) times weights in [-bound, bound] (both ends present), both orientations,
    # every output kind, against numpy's int64 sums.
    a = int8_data(rng, (m, k), extreme=0.3)
    w = rng.integers(-bound, bound + 1, (n, k), dtype=np.int8)
    mask = rng.random((n, k)) < 0.3
    w[mask] = rng.choice(np.array([-bound, bound], np.int8), size=int(mask.sum()))
    w.reshape(-1)[:2] = [-bound, bound][: w.size]
    assert (_C.gemm_biased_flush(w) > 0) == (bound <= 64)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    acc = ref.linear_acc(a, w)
    packed = _C.PackedGemmRows(w)
    cols = np.ascontiguousarray(a.T)
    for kind in KINDS:
        b = None if kind == "raw" else bias
        want = _expected(acc if b is None else acc + bias, kind, 2.0**-7)
        assert_bitexact(packed.run(a, b, kernel=kernel, **_epilogue(kind, 2.0**-7)), want)
        assert_bitexact(_C.gemm_cols(w, cols, b, kernel=kernel, **_epilogue(kind, 2.0**-7)), want.T)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bound", [1, 8, 9, 32, 33, 64])
def test_narrow_weights_extreme_sums(kernel, bound):
    # The largest biased pair sums: x = 127 (byte 255) or x = -128 (byte 0) everywhere against w = +-bound everywhere,
    # at the longest reduction (int16 sums flushed exactly at their limit, the int32 accumulator near its edge).
    k = 131071
    x = np.full((k, 4), 127, np.int8)
    x[:, 1] = -128
    x[::2, 2] = -128
    x[1::3, 3] = -128
    w = np.full((3, k), bound, np.int8)
    w[1] = -bound
    w[2, ::2] = -bound
    acc = np.asarray(w, np.int64) @ np.asarray(x, np.int64)
    assert np.abs(acc).max() == 128 * bound * k
    assert_bitexact(_C.gemm_cols(w, x, kind="raw", kernel=kernel), acc.astype(np.int32))
    got = _C.PackedGemmRows(w).run(np.ascontiguousarray(x.T), kind="raw", kernel=kernel)
    assert_bitexact(got, acc.T.astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
def test_minus_128_weights_extreme_pairs(kernel):
    # Signed activations against weights with -128 (the AVX2 kernels without vpsignb, |x| * (w ^ s) plus the sums
    # of max(-x, 0) per pixel or activation row): x = -128 against w = 127 gives the pair sum -32768 of that
    # product, the int16 minimum; w = -128 against x = -128 and 127 the others at their limits, at the longest
    # reduction.
    k = 131071
    x = np.full((k, 5), -128, np.int8)
    x[:, 1] = 127
    x[::2, 2] = 127
    x[1::3, 3] = 0
    x[:, 4] = -1
    w = np.full((7, k), 127, np.int8)
    w[0, 0] = -128  # every row set holds a -128
    w[1] = -128
    w[2, ::2] = -128
    w[3, 1::2] = 0
    w[4] = -127
    w[5, ::3] = -128
    w[6] = 1
    acc = np.asarray(w, np.int64) @ np.asarray(x, np.int64)
    assert np.abs(acc).max() == 128 * 128 * k
    assert_bitexact(_C.gemm_cols(w, x, kind="raw", kernel=kernel), acc.astype(np.int32))
    e = _epilogue("int16", 2.0**-16)
    assert_bitexact(_C.gemm_cols(w, x, kernel=kernel, **e), _expected(acc, "int16", 2.0**-16))
    # The rows orientation (LinearInt): the same product with one sum of max(-x, 0) per activation row.
    a = np.ascontiguousarray(x.T)
    assert_bitexact(_C.PackedGemmRows(w).run(a, kind="raw", kernel=kernel), acc.T.astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(
    "shape", [(1, 3, 6, 17, 13, 3), (2, 8, 9, 70, 14, 3), (1, 64, 6, 30, 70, 3), (1, 5, 4, 9, 6, 1)]
)
def test_conv_minus_128_weights_mixed_panels(kernel, shape, rng):
    # A convolution whose weights hold -128: panels of non-negative pixels take the post-ReLU kernel, the others the
    # kernel without vpsignb with their own per-pixel sums (a negative value in one panel only, one at the end).
    n, c, h, w, m, kk = shape
    x = rng.integers(0, 128, (n, c, h, w), dtype=np.int8)
    x[0, 0, h // 2, w // 2] = -128
    x[-1, -1, -1, -1] = -1
    wt = int8_data(rng, (m, c, kk, kk), extreme=0.3)
    wt.reshape(-1)[0] = -128
    args = dict(strides=[1, 1], pads=[kk // 2] * 4, dilations=[1, 1], group=1, kernel=kernel)
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    want = ref.conv2d_acc(x, wt, None, (1, 1), (kk // 2,) * 4, (1, 1), 1).astype(np.int32)
    assert_bitexact(got, want)
    x = int8_data(rng, (n, c, h, w), extreme=0.3)  # signed everywhere
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, (1, 1), (kk // 2,) * 4, (1, 1), 1).astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(
    "m,n,k", [(1, 1, 1), (5, 65, 3), (7, 13, 17), (13, 67, 131), (6, 8, 33), (19, 9, 2), (4, 130, 16)]
)
def test_rows_minus_128_weights_signed(kernel, m, n, k, rng):
    # LinearInt's orientation with -128 weights and signed activations: partial 6-row tiles, K % 4 != 0 (the last
    # k-group of the per-row sums), 8- and 16-lane passes; every output kind against numpy.
    a = int8_data(rng, (m, k), extreme=0.3)
    w = int8_data(rng, (n, k), extreme=0.3)
    w.reshape(-1)[-1] = -128
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    acc = ref.linear_acc(a, w)
    packed = _C.PackedGemmRows(w)
    for kind in KINDS:
        b = None if kind == "raw" else bias
        want = _expected(acc if b is None else acc + bias, kind, 2.0**-7)
        assert_bitexact(packed.run(a, b, kernel=kernel, **_epilogue(kind, 2.0**-7)), want)


# The cols kernel for activations in [0, 127] runs 16 pixels per tile while 16 are left and the int16 sums last more
# than one k-group (else 8): pixel counts around 16, weight rows around the 6-row blocks, and reductions that end
# exactly at, one k-group after, and one k-group before a widening of the int16 sums.
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bound,w_max", [(1, 127), (3, 64), (15, 127), (63, 127), (15, 7), (63, 2)])
@pytest.mark.parametrize("pixels", [15, 16, 17, 24, 40, 72, 130])
def test_nonneg_sixteen_pixel_tiles(kernel, bound, w_max, pixels, rng):
    flush = 32767 // (2 * bound * max(w_max, 128 if w_max == 127 else w_max))
    assert flush > 1
    for m in (1, 5, 7, 13):
        for kgroups in (flush, flush + 1, 2 * flush - 1):
            k = 4 * kgroups - 1  # the last k-group padded
            # Worst-case int16 sums: x = bound everywhere against w = -128 (or -w_max) / w_max everywhere, rows
            # alternating, then random data (pixels and rows must not trade places between the two pixel vectors).
            x = np.full((k, pixels), bound, np.int8)
            w = np.full((m, k), -128 if w_max == 127 else -w_max, np.int8)
            w[1::2] = w_max
            xr = rng.integers(0, bound + 1, (k, pixels), dtype=np.int8)
            xr[0, 0] = bound
            wr = rng.integers(-w_max - (w_max == 127), w_max + 1, (m, k), dtype=np.int8)
            for xx, ww in ((x, w), (xr, wr)):
                assert _C.gemm_proven_x_max(xx) == bound
                acc = np.asarray(ww, np.int64) @ np.asarray(xx, np.int64)
                assert_bitexact(_C.gemm_cols(ww, xx, kind="raw", kernel=kernel), acc.astype(np.int32))
                bias = rng.integers(-(2**20), 2**20, m).astype(np.int32)
                want = _expected(acc + bias[:, None], "int16", 2.0**-5)
                assert_bitexact(_C.gemm_cols(ww, xx, bias, kernel=kernel, **_epilogue("int16", 2.0**-5)), want)
