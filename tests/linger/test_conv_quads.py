"""Conv2dInt on the channel-quad path: a GEMM-path convolution with a multiple of 4 input channels per group (and
not a plain 1x1) reduces in the order (tap, channel), interleaves its phase planes by channel quads once per image
and either copies each pixel panel from them (any output width, signed inputs, every kernel path) or, on AVX2 with
inputs proven non-negative and output rows of a multiple of 8 pixels, lets the kernel read them in place (units of
pixels sized so that their k-groups stay in L1). Every case against the numpy int64 reference, with every epilogue
kind: output widths that are and are not multiples of 8 (rows of 1 to 3 pixels too), strides, dilation, groups,
asymmetric pads, 1x1 with padding or stride, reductions from one k-group to thousands, weight rows not a multiple of
the 6-row tile, batches and two threads; and an image whose quad planes would pass 256 KiB, which takes the
transposing packer with the weights in their original order instead; 1-D layers with many channels, whose planes
are built in bands of outputs."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import KERNELS, check_conv_epilogues, int8_data

from conftest import assert_bitexact
from ortquant import _C
from ortquant.reference import linger_matrix as ref

# (N, C, H, W, M, kh, kw, strides, pads [t, l, b, r], dilations, group)
CASES = [
    (2, 16, 16, 16, 64, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 16-pixel rows, M = 64 (a 4-row last tile)
    (1, 32, 12, 32, 32, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 72 k-groups: units of 56 pixels across rows
    (1, 64, 8, 16, 13, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 144 k-groups: units of 24, a partial last unit
    (2, 8, 17, 33, 7, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride 2, 17-pixel rows: copied panels
    (1, 8, 31, 32, 9, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride 2, 16-pixel rows: in place
    (2, 16, 8, 8, 12, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2),  # groups of 8 channels, 8-pixel rows
    (1, 4, 20, 24, 5, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation 2, one quad
    (3, 4, 5, 3, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 3-pixel rows (copies shorter than 16 bytes)
    (1, 8, 4, 2, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 2-pixel rows
    (1, 8, 6, 5, 6, 3, 1, (1, 1), (1, 0, 1, 0), (1, 1), 1),  # no horizontal pad: planes as wide as the output
    (1, 8, 6, 16, 6, 3, 1, (1, 1), (1, 0, 1, 0), (1, 1), 1),  # the same with 16-pixel rows
    (2, 4, 6, 16, 3, 1, 1, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 1x1 with padding, one k-group
    (1, 4, 16, 32, 11, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),  # 1x1 stride 2
    (1, 12, 9, 40, 8, 2, 5, (1, 1), (2, 0, 1, 3), (1, 1), 1),  # 2x5, asymmetric pads, 40-pixel rows
    (1, 300, 3, 8, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 675 k-groups: one 8-pixel chunk per unit
    (1, 24, 5, 21, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 3),  # 3 groups of 3 rows, 21-pixel rows
    (1, 64, 64, 70, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # planes over 256 KiB: the transposing packer
    # 1-D layers (one input row, a 1-row kernel) with at least 32 quads and a multiple of 8 outputs above 64: planes
    # in bands of 24 to 64 outputs, each with its halo (read as a grid of bands; every band and halo must count).
    (1, 128, 1, 240, 20, 1, 5, (1, 1), (0, 2, 0, 2), (1, 1), 1),  # k5, 6 bands of 40, a 2-row last tile
    (2, 256, 1, 96, 13, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1), 1),  # 64 quads, 3 bands of 32, batch 2
    (1, 128, 1, 120, 7, 1, 3, (1, 1), (0, 3, 0, 1), (1, 2), 1),  # dilation 2, asymmetric pads: halo of 4
    (1, 256, 1, 80, 8, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1), 2),  # 2 groups of 32 quads, 2 bands of 40
    (1, 128, 1, 136, 5, 1, 9, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # no padding, k9: 4 bands of 32 up to the row's end
    (1, 128, 1, 100, 6, 1, 5, (1, 1), (0, 2, 0, 2), (1, 1), 1),  # 100 outputs (not a multiple of 8): whole rows
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_quad_conv_signed(kernel, case, rng):
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_quad_conv_nonneg(kernel, case, rng):
    # Post-ReLU inputs (proven non-negative per image: read in place on AVX2 where the rows allow) with weights
    # including -128, on two threads (units split between tasks).
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = rng.integers(0, 128, (n, c, h, w), dtype=np.int8)
    x.reshape(-1)[: max(1, x.size // 4)] = 127
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.3)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel, threads=2)


@pytest.mark.parametrize("kernel", KERNELS)
def test_quad_conv_nonneg_worst_case_sums(kernel):
    # Every input 127 and every weight -128 (or 127): the int16 pair sums of the in-place kernel widen after every
    # k-group, and the exact sums are as large as the reduction allows.
    for wv in (-128, 127):
        x = np.full((1, 40, 5, 16), 127, np.int8)
        wt = np.full((7, 40, 3, 3), wv, np.int8)
        got = _C.conv2d(x, wt, None, pads=[1, 1, 1, 1], kind="raw", kernel=kernel)
        want = ref.conv2d_acc(x, wt, None, (1, 1), (1, 1, 1, 1), (1, 1), 1).astype(np.int32)
        assert_bitexact(got, want)
        assert np.abs(want).max() == 40 * 9 * 127 * abs(wv)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("x_max,w_max", [(15, 8), (63, 32), (3, 127)])
def test_quad_conv_narrow_codes(kernel, case, x_max, w_max, rng):
    # Narrow codes (integer mode's 2- to 6-bit activations): the int16 sums of the in-place kernel last for several
    # k-groups (32767 // (2 * x_max * max|w|): 136, 8, 43) and it reads two 8-pixel chunks per k-group while two are
    # left in a unit; random data (chunks must not trade places), then the largest sums each bound allows.
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = rng.integers(0, x_max + 1, (n, c, h, w), dtype=np.int8)
    x.reshape(-1)[0] = x_max
    wt = rng.integers(-w_max, min(w_max, 127) + 1, (m, c // g, kh, kw), dtype=np.int8)
    wt.reshape(-1)[0] = -w_max
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel)
    s, p, d, g = case[7:]
    x[...] = x_max
    wt[...] = -w_max
    wt[1::2] = min(w_max, 127)
    got = _C.conv2d(x, wt, None, strides=list(s), pads=list(p), dilations=list(d), group=g, kind="raw", kernel=kernel)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32))
