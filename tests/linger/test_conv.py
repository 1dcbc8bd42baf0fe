"""Conv2dInt / Conv1dInt: the convolution core on every kernel path (general groups via im2col + GEMM, the
depthwise kernel, the direct 1x1 path) and through onnxruntime, bit-exact against the numpy int64 reference;
attribute and input validation."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import DOMAINS, KERNELS, int8_data, out_attrs, run_matrix

from conftest import ORT_ERRORS, assert_bitexact
from ortquant import _C
from ortquant.reference import linger_matrix as ref

# (N, C, H, W, M, kh, kw, strides, pads [t, l, b, r], dilations, group)
CASES = [
    (1, 3, 6, 6, 4, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 4, 7, 7, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 2),
    (1, 3, 6, 6, 4, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 1),
    (1, 2, 9, 9, 3, 5, 5, (4, 4), (2, 2, 2, 2), (1, 1), 1),
    (2, 3, 3, 4, 3, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 3),  # depthwise 1x1
    (1, 8, 10, 11, 8, 3, 3, (2, 2), (1, 0, 2, 1), (1, 1), 8),  # depthwise, asymmetric pads
    (1, 8, 10, 11, 16, 3, 2, (1, 3), (0, 1, 1, 0), (2, 1), 8),  # depthwise multiplier 2
    (1, 16, 5, 5, 32, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1 direct path
    (2, 5, 13, 7, 7, 2, 3, (3, 1), (1, 2, 0, 1), (1, 2), 1),
    (1, 64, 8, 8, 70, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # M not a multiple of the 6-row tile
    (1, 6, 17, 3, 4, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1), 2),
    (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (1, 3, 2, 2, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # more padding than input
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_conv_core_matches_reference(kernel, case, rng):
    n, c, h, w, m, kh, kw, s, p, d, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel)
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, g))
    got = _C.conv2d(x, wt, b, kind="float", fdiv=3.0 * 128, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 3.0, 128.0, None, None, s, p, d, g))
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32))


# Depthwise layers (group == C == M) for both depthwise algorithms, the channels-last one (dwnhwc) and the
# per-plane one: (N, C, H, W, kh, kw, strides, pads [t, l, b, r], dilations). Channel counts around the 16-channel
# block, widths around its 16-pixel output tile, odd and even tap counts, 1-D rows, strides past the padded width
# (issue 9's shapes: width 1 with pads 1 and stride 3, width 6 with stride 64).
DW_CASES = [
    (1, 16, 9, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (2, 20, 7, 18, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),
    (1, 33, 6, 5, 5, 5, (1, 2), (2, 1, 2, 3), (1, 1)),
    (1, 8, 10, 11, 3, 2, (1, 3), (0, 1, 1, 0), (2, 1)),
    (1, 17, 1, 40, 1, 5, (1, 1), (0, 2, 0, 2), (1, 1)),  # a 1-D layer, k5
    (1, 32, 1, 23, 1, 3, (1, 2), (0, 1, 0, 1), (1, 3)),  # 1-D, stride 2, dilation 3
    (1, 16, 4, 4, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1)),  # one tap
    (1, 16, 3, 1, 3, 3, (1, 3), (1, 1, 1, 1), (1, 1)),  # width 1, pads 1, stride 3
    (1, 16, 4, 6, 1, 3, (1, 64), (0, 0, 0, 0), (1, 1)),  # width 6, stride 64
    (1, 16, 5, 6, 2, 2, (2, 64), (1, 1, 0, 2), (1, 1)),
    (1, 3, 5, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),  # fewer channels than a block
    # Horizontal stride 2 with at least 8 output columns: 3 x 3 and 3 x 4 kernels with stride 2 (the vector path's
    # row kernel) with output widths 8, 14, 12 and 17 around its 8-column strips, an input row narrower than 16 and
    # several images; and the shapes next to it that keep the block (another vertical stride or dilation, other
    # kernel sizes, pads wider than 16).
    (2, 18, 28, 28, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),
    (1, 16, 5, 15, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),
    (1, 16, 6, 33, 3, 3, (2, 2), (0, 1, 1, 1), (1, 1)),
    (1, 16, 8, 24, 3, 4, (2, 2), (1, 2, 0, 1), (1, 1)),
    (1, 5, 6, 32, 3, 3, (1, 2), (0, 0, 2, 1), (1, 1)),
    (1, 16, 9, 34, 5, 5, (3, 2), (2, 2, 2, 2), (2, 1)),
    (1, 17, 4, 33, 2, 4, (2, 2), (1, 1, 0, 2), (1, 1)),
    (1, 16, 7, 20, 7, 1, (1, 2), (3, 0, 3, 0), (1, 1)),
    (1, 16, 3, 9, 1, 2, (1, 2), (0, 18, 0, 17), (1, 1)),
    # Images whose channels-last block is larger than 256 KiB run in bands of output rows (each band builds only the
    # padded rows it reads): unit stride, and strides with dilation and a last short band.
    (1, 20, 96, 100, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (1, 17, 80, 130, 5, 5, (2, 1), (2, 2, 3, 2), (2, 2)),
]


@pytest.mark.parametrize("algo", ["nhwc", "planes"])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", DW_CASES)
def test_depthwise_algorithms_match_reference(algo, kernel, case, rng):
    n, c, h, w, kh, kw, s, p, d = case
    x = int8_data(rng, (n, c, h, w), extreme=0.3)
    wt = int8_data(rng, (c, 1, kh, kw), extreme=0.3)
    b = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=c, kernel=kernel, algo=algo)
    for threads in (1, 2):
        got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), threads=threads, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, c))
    # A range narrower than the output type (4-bit codes): the int32 shift epilogue clamps before it packs.
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), lo=-8.0, hi=7.0, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 4, s, p, d, c))
    got = _C.conv2d(x, wt, b, kind="int16", ratio=1.0 / 8, lo=-32768.0, hi=32767.0, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 8.0, 1.0, 1.0, 16, s, p, d, c))
    got = _C.conv2d(x, wt, b, kind="int32", ratio=1.0, lo=-(2.0**31), hi=2.0**31 - 1, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 1.0, 1.0, 1.0, 32, s, p, d, c))
    # A ratio that is not a power of two, and a bias so large that the int32 shift epilogue would overflow: the
    # float64 epilogue.
    got = _C.conv2d(x, wt, b, kind="int8", ratio=0.3 / 64, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 1.0, 0.3, 8, s, p, d, c))
    big = b.copy()
    big[-1] = 2**31 - 1
    got = _C.conv2d(x, wt, big, kind="int8", ratio=2.0**-24, **args)
    assert_bitexact(got, ref.conv2d(x, wt, big, 2.0**12, 2.0**12, 1.0, 8, s, p, d, c))
    got = _C.conv2d(x, wt, b, kind="float", fdiv=3.0 * 128, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 3.0, 128.0, None, None, s, p, d, c))
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, c).astype(np.int32))


# Stride-1 depthwise with every input promised in [0, x_max] (integer mode's non-negative codes): the vector path's
# int16 row kernel when x_max * max_c sum_t |w| <= 32767, else the block. Output widths around its 16-column vectors
# (16, 17, 31, 40), kernels 3x3 and 5x5 (fixed loops) and 1x3, 7x1 (the generic one), vertical dilation,
# asymmetric pads, a layer at the int16 bound exactly, one past it, and a large image (bands of rows).
# (N, C, H, W, kh, kw, pads [t, l, b, r], dilations, x_max, |w| max)
S1_CASES = [
    (1, 16, 9, 16, 3, 3, (1, 1, 1, 1), (1, 1), 15, 8),
    (2, 20, 7, 17, 3, 3, (1, 1, 1, 1), (1, 1), 15, 8),
    (1, 17, 8, 31, 5, 5, (2, 2, 2, 2), (1, 1), 127, 10),
    (1, 16, 6, 40, 1, 3, (0, 1, 0, 1), (1, 1), 63, 64),
    (1, 16, 12, 20, 7, 1, (3, 0, 3, 0), (2, 1), 7, 100),
    (1, 3, 5, 18, 3, 3, (0, 2, 1, 0), (1, 1), 1, 127),
    (1, 16, 5, 24, 3, 3, (1, 1, 1, 1), (1, 1), 127, -1),  # sum |w| = 258 on channel 0: 127 * 258 = 32766
    (1, 16, 5, 24, 3, 3, (1, 1, 1, 1), (1, 1), 127, -2),  # one more: 32893 > 32767, the block
    (1, 16, 100, 96, 3, 3, (1, 1, 1, 1), (1, 1), 15, 8),
    # 8-bit weights, sums far past the int16 bound: the block on AVX2, the row kernel's int32 sums on AVX-512 VNNI
    # (raw sums only); kernels of 1, 2 and 3 tap groups per row (1x4, 2x7, 3x9 with vertical dilation)
    (1, 16, 6, 33, 3, 3, (1, 1, 1, 1), (1, 1), 127, 127),
    (1, 16, 5, 20, 1, 4, (0, 2, 0, 1), (1, 1), 127, 127),
    (1, 16, 9, 24, 2, 7, (1, 3, 0, 3), (1, 1), 127, 127),
    (1, 16, 11, 30, 3, 9, (2, 4, 2, 4), (2, 1), 127, 127),
    # 3-row kernels of 1, 2 and 4 columns (the VNNI kernel's register-blocked rows, one tap group) and a large image
    # whose bands end in a block of fewer than 8 rows
    (1, 16, 7, 21, 3, 1, (1, 0, 1, 0), (1, 1), 127, 127),
    (1, 16, 10, 19, 3, 2, (1, 1, 1, 0), (1, 1), 127, 127),
    (1, 16, 13, 35, 3, 4, (0, 2, 2, 1), (1, 1), 127, 127),
    (2, 16, 70, 50, 3, 3, (1, 1, 1, 1), (1, 1), 127, 127),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", S1_CASES)
def test_depthwise_nonnegative_inputs_match_reference(kernel, case, rng):
    n, c, h, w, kh, kw, p, d, x_max, w_max = case
    x = rng.integers(0, x_max + 1, (n, c, h, w)).astype(np.int8)
    if w_max > 0:
        wt = rng.integers(-w_max, w_max + 1, (c, 1, kh, kw)).astype(np.int8)
        # The extremes: one channel at +-x_max * w_max on every tap.
        x[0, 0] = x_max
        wt[0] = -w_max
    else:  # the int16 bound: channel 0's sum |w| = 258 (-1) or 259 (-2), inputs all x_max, the sum negative
        wt = rng.integers(-8, 9, (c, 1, kh, kw)).astype(np.int8)
        wt[0] = np.array([-127, -127, -4, 0, 0, 0, 0, 0, 0]).reshape(1, 3, 3) + np.array(
            [0, 0, 1 + w_max, 0, 0, 0, 0, 0, 0]
        ).reshape(1, 3, 3)
        x[0, 0] = x_max
    b = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    args = dict(strides=[1, 1], pads=list(p), dilations=list(d), group=c, kernel=kernel, x_max=x_max)
    s = (1, 1)
    for algo in ("nhwc", "planes"):
        for threads in (1, 2):
            got = _C.conv2d(x, wt, None, kind="raw", threads=threads, algo=algo, **args)
            assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, c).astype(np.int32))
        got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), lo=-8.0, hi=7.0, algo=algo, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 4, s, p, d, c))
        got = _C.conv2d(x, wt, b, kind="int16", ratio=1.0 / 8, lo=-32768.0, hi=32767.0, algo=algo, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 8.0, 1.0, 1.0, 16, s, p, d, c))
        got = _C.conv2d(x, wt, b, kind="int8", ratio=0.3 / 64, algo=algo, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 1.0, 0.3, 8, s, p, d, c))
        got = _C.conv2d(x, wt, b, kind="float", fdiv=3.0 * 128, algo=algo, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 3.0, 128.0, None, None, s, p, d, c))


# Stride-1 depthwise with signed inputs (no promise: x_max = -1) and weights small enough that 128 * max_c sum_t |w|
# fits int16: the vector path's int16 row kernel (inputs sign-extended) also for fewer than 8 channels, where the
# plane kernel ran before. Cases at the bound exactly (sum |w| = 255 with every input -128) and one past it (256: the
# block or the plane kernel), 1 to 17 channels, 3x3 / 5x5 / 1x7 kernels, dilation, asymmetric pads.
# (N, C, H, W, kh, kw, pads [t, l, b, r], dilations, |w| max; -1 / -2: channel 0 at sum |w| 255 / 256)
S1_SIGNED_CASES = [
    (1, 3, 20, 40, 3, 3, (1, 1, 1, 1), (1, 1), 7),
    (2, 1, 9, 16, 3, 3, (1, 1, 1, 1), (1, 1), 28),
    (1, 5, 9, 17, 5, 5, (2, 2, 2, 2), (1, 1), 10),
    (1, 7, 8, 31, 1, 7, (0, 3, 0, 2), (1, 1), 30),
    (1, 6, 12, 20, 3, 3, (2, 1, 2, 0), (2, 1), 20),
    (1, 17, 7, 33, 3, 3, (1, 1, 1, 1), (1, 1), 28),
    (1, 3, 6, 24, 3, 3, (1, 1, 1, 1), (1, 1), -1),
    (1, 3, 6, 24, 3, 3, (1, 1, 1, 1), (1, 1), -2),
    (1, 2, 70, 50, 3, 3, (1, 1, 1, 1), (1, 1), 7),  # bands of rows
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", S1_SIGNED_CASES)
def test_depthwise_signed_inputs_small_weights_match_reference(kernel, case, rng):
    n, c, h, w, kh, kw, p, d, w_max = case
    x = rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)
    if w_max > 0:
        wt = rng.integers(-w_max, w_max + 1, (c, 1, kh, kw)).astype(np.int8)
    else:  # channel 0: sum |w| = 255 (-1) or 256 (-2) over nine taps, every input -128: the extreme sums
        wt = rng.integers(-7, 8, (c, 1, kh, kw)).astype(np.int8)
        wt[0] = np.array([127, 127, 1 - w_max, 0, 0, 0, 0, 0, 0]).reshape(1, 3, 3)
        x[0, 0] = -128
    x[0, 0, 0, :3] = [-128, 127, -128]
    b = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    s = (1, 1)
    want_raw = ref.conv2d_acc(x, wt, None, s, p, d, c).astype(np.int32)
    for algo in ("auto", "nhwc", "planes"):
        args = dict(strides=[1, 1], pads=list(p), dilations=list(d), group=c, kernel=kernel, algo=algo)
        for threads in (1, 2):
            assert_bitexact(_C.conv2d(x, wt, None, kind="raw", threads=threads, **args), want_raw)
        got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), lo=-8.0, hi=7.0, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 4, s, p, d, c))
        got = _C.conv2d(x, wt, b, kind="float", fdiv=3.0 * 128, **args)
        assert_bitexact(got, ref.conv2d(x, wt, b, 3.0, 128.0, None, None, s, p, d, c))


def test_depthwise_x_max_promise_is_checked(rng):
    x = np.full((1, 16, 4, 20), 3, np.int8)
    with pytest.raises(Exception, match="outside"):
        _C.conv2d(x, int8_data(rng, (16, 1, 3, 3)), group=16, x_max=2)


def test_depthwise_extreme_sums():
    # Every input and weight -128 (or the product -128 * 127) on a 5x5 kernel: the int16 pair products are
    # 2 * 16384 = 32768, one past int16 (vpmaddwd sums them in int32, exactly).
    for xv, wv in [(-128, -128), (-128, 127), (127, 127)]:
        x = np.full((1, 16, 7, 7), xv, np.int8)
        wt = np.full((16, 1, 5, 5), wv, np.int8)
        for kernel in KERNELS:
            for algo in ("nhwc", "planes"):
                got = _C.conv2d(x, wt, None, pads=[2, 2, 2, 2], group=16, kind="raw", kernel=kernel, algo=algo)
                assert_bitexact(got, ref.conv2d_acc(x, wt, None, (1, 1), (2, 2, 2, 2), (1, 1), 16).astype(np.int32))


def test_conv_algo_argument_is_checked(rng):
    with pytest.raises(Exception, match="unknown convolution algorithm"):
        _C.conv2d(int8_data(rng, (1, 2, 3, 3)), int8_data(rng, (2, 1, 1, 1)), group=2, algo="bogus")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_conv_core_weights_without_minus_128(kernel, case, rng):
    # Symmetrically quantized weights ([-127, 127], as linger exports them) take the AVX2 vpmaddubsw kernel.
    n, c, h, w, m, kh, kw, s, p, d, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.3)
    wt = np.maximum(int8_data(rng, (m, c // g, kh, kw), extreme=0.3), -127).astype(np.int8)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel)
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, g))
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("o_bits,scale_o", [(8, 16.0), (16, 4096.0), (32, 1.0), (4, 1.0), (None, None)])
@pytest.mark.parametrize("case", [CASES[1], CASES[5], CASES[7], CASES[8]])
@pytest.mark.parametrize("const", [True, False])
def test_conv2d_ort(domain, o_bits, scale_o, case, const, rng):
    n, c, h, w, m, kh, kw, s, p, d, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    attrs = out_attrs(o_bits, scale_o, scale_x=64.0, scale_w=128.0)
    attrs.update(kernel_shape=[kh, kw], strides=list(s), pads=list(p), dilations=list(d), group=g)
    got = run_matrix("Conv2dInt", [x, wt, b], attrs, const=[False, const, const], domain=domain)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, scale_o, o_bits, s, p, d, g))


def test_conv2d_defaults_and_no_bias(rng):
    x = int8_data(rng, (2, 3, 5, 6))
    wt = int8_data(rng, (4, 3, 2, 2))
    got = run_matrix("Conv2dInt", [x, wt], out_attrs(8, 8.0, scale_x=16.0, scale_w=64.0), const=[False, True])
    assert_bitexact(got, ref.conv2d(x, wt, None, 16.0, 64.0, 8.0, 8))


def test_conv2d_resnet_like_threads(rng):
    x = int8_data(rng, (1, 64, 20, 20))
    wt = int8_data(rng, (64, 64, 3, 3))
    b = rng.integers(-(2**16), 2**16, 64).astype(np.int32)
    attrs = out_attrs(8, 8.0, scale_x=32.0, scale_w=128.0)
    attrs.update(pads=[1, 1, 1, 1])
    want = ref.conv2d(x, wt, b, 32.0, 128.0, 8.0, 8, pads=(1, 1, 1, 1))
    for threads in (1, 2):
        assert_bitexact(run_matrix("Conv2dInt", [x, wt, b], attrs, const=[False, True, True], threads=threads), want)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("const", [True, False])
def test_conv1d_ort(domain, const, rng):
    for n, c, length, m, k, s, p, d, g in [
        (2, 4, 9, 5, 3, 2, (1, 1), 1, 1),
        (1, 6, 20, 6, 5, 1, (0, 3), 2, 3),
        (3, 2, 4, 4, 1, 1, (0, 0), 1, 2),
    ]:
        x = int8_data(rng, (n, c, length))
        wt = int8_data(rng, (m, c // g, k))
        b = rng.integers(-5000, 5000, m).astype(np.int32)
        for o_bits, scale_o in [(8, 128.0), (None, None)]:
            attrs = out_attrs(o_bits, scale_o, scale_x=64.0, scale_w=256.0)
            attrs.update(kernel_shape=[k], strides=[s], pads=list(p), dilations=[d], group=g)
            got = run_matrix("Conv1dInt", [x, wt, b], attrs, const=[False, const, const], domain=domain)
            assert_bitexact(got, ref.conv1d(x, wt, b, 64.0, 256.0, scale_o, o_bits, s, p, d, g))


# ---- bad input -------------------------------------------------------------------------------------------


def _expect_error(op, inputs, attrs, const, *causes):
    with pytest.raises(ORT_ERRORS) as e:
        run_matrix(op, inputs, attrs, const=const)
    msg = str(e.value)
    assert f"{op.lower()}_node" in msg, msg
    for cause in causes:
        assert cause in msg, msg


def _attrs(**kw):
    a = out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0)
    a.update(kw)
    return a


def test_channel_and_group_mismatch(rng):
    x = int8_data(rng, (1, 5, 6, 6))
    _expect_error("Conv2dInt", [x, np.zeros((4, 4, 3, 3), np.int8)], _attrs(), [False, True], "5 channels", "expect 4")
    _expect_error("Conv2dInt", [x, np.zeros((4, 2, 3, 3), np.int8)], _attrs(group=2), [False, False], "5 channels")
    _expect_error(
        "Conv2dInt", [x, np.zeros((3, 1, 3, 3), np.int8)], _attrs(group=5), [False, True], "multiple of group"
    )
    _expect_error("Conv2dInt", [x, np.zeros((4, 5, 3, 3), np.int8)], _attrs(group=0), [False, True], "group")


def test_bad_kernel_pads_strides(rng):
    x = int8_data(rng, (1, 2, 6, 6))
    w = np.zeros((4, 2, 3, 3), np.int8)
    _expect_error("Conv2dInt", [x, w], _attrs(kernel_shape=[3, 2]), [False, True], "kernel_shape", "does not match")
    _expect_error("Conv2dInt", [x, w], _attrs(kernel_shape=[3]), [False, True], "kernel_shape", "2 values")
    _expect_error("Conv2dInt", [x, w], _attrs(strides=[0, 1]), [False, True], "'strides'", "[1, 64]")
    _expect_error("Conv2dInt", [x, w], _attrs(dilations=[1, -1]), [False, True], "'dilations'", "got -1")
    _expect_error("Conv2dInt", [x, w], _attrs(pads=[1, -1, 1, 1]), [False, True], "'pads'", "got -1")
    _expect_error("Conv2dInt", [x, w], _attrs(pads=[1, 1]), [False, True], "pads", "4 values")
    _expect_error("Conv2dInt", [x, w], _attrs(auto_pad="SAME_UPPER"), [False, True], "auto_pad")
    _expect_error(
        "Conv2dInt", [int8_data(rng, (1, 2, 2, 6)), w], _attrs(), [False, True], "smaller than the dilated kernel"
    )
    _expect_error("Conv2dInt", [int8_data(rng, (2, 6, 6)), w], _attrs(), [False, True], "must be 4-D")
    _expect_error(
        "Conv1dInt",
        [int8_data(rng, (1, 2, 6)), np.zeros((4, 2, 3), np.int8)],
        _attrs(strides=[1, 1]),
        [False, True],
        "strides",
        "1 values",
    )


def test_weight_and_bias_types(rng):
    x = int8_data(rng, (1, 2, 6, 6))
    _expect_error(
        "Conv2dInt", [x, np.zeros((4, 2, 3, 3), np.uint8)], _attrs(), [False, True], "weight must be int8", "uint8"
    )
    _expect_error("Conv2dInt", [x, np.zeros((4, 2, 3, 3), np.float32)], _attrs(), [False, False], "weight must be int8")
    _expect_error("Conv2dInt", [x, np.zeros((4, 2, 3), np.int8)], _attrs(), [False, True], "weight must be 4-D")
    _expect_error(
        "Conv2dInt",
        [x, np.zeros((4, 2, 3, 3), np.int8), np.zeros(4, np.float32)],
        _attrs(),
        [False, True, True],
        "bias must be int32",
    )
    _expect_error(
        "Conv2dInt",
        [x, np.zeros((4, 2, 3, 3), np.int8), np.zeros(5, np.int32)],
        _attrs(),
        [False, True, True],
        "bias must have shape [4]",
    )


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bound", [1, 15, 127])
def test_conv_core_nonneg_input(kernel, case, bound, rng):
    # A non-negative input (after a ReLU: the usual case) takes the AVX2 product without the sign step; its
    # largest products (x = bound against -128 and 127 weights) and one negative value (back to the sign kernel).
    n, c, h, w, m, kh, kw, s, p, d, g = case
    x = rng.integers(0, bound + 1, (n, c, h, w), dtype=np.int8)
    x.reshape(-1)[: max(1, x.size // 3)] = bound
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.5)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel)
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, g))
    assert_bitexact(
        _C.conv2d(x, wt, None, kind="raw", **args), ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32)
    )
    x.reshape(-1)[-1] = -1
    assert_bitexact(
        _C.conv2d(x, wt, None, kind="raw", **args), ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32)
    )
