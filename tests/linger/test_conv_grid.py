"""Conv2dInt / Conv1dInt on the GEMM path with output rows of at least 16 pixels whose padded (or stride-phase)
input rows are wider than the output rows: the pixel panels then hold only output pixels, one segment per output
row, and the GEMM writes the NCHW output directly. Every kernel path against the numpy int64 reference, with output
widths around the 16-pixel chunks and the 64-pixel panels (segments that start in a panel's last 16 lanes, short
first and last segments, a partial last panel), strides 2 and 3 with several left pads, dilation, groups, batches,
1-D layers, several threads, and the 1x1 layer without padding (input planes read as they are). On the output-pixel
panels non-negativity (the cheaper AVX2 product) is proven per panel from the packed bytes: inputs with a few
negative values mix both kinds of panel in one call."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import KERNELS, check_conv_epilogues, int8_data

from conftest import assert_bitexact
from ortquant import _C
from ortquant.reference import linger_matrix as ref

# (N, C, H, W, M, kh, kw, strides, pads [t, l, b, r], dilations, group)
CASES = [
    (1, 5, 9, 56, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # a 56-wide layer: 64-pixel panels over 56-pixel rows
    (2, 4, 7, 16, 6, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2),  # output rows of exactly 16, groups, batch 2
    (1, 3, 6, 17, 13, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 17: a 1-pixel segment per row
    (1, 4, 11, 57, 5, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride 2: output rows of 29
    (1, 3, 12, 40, 4, 3, 3, (2, 2), (0, 1, 1, 0), (1, 1), 1),  # stride 2, asymmetric pads: output rows of 20
    (2, 6, 5, 31, 9, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1), 3),  # 5x5, groups
    (1, 3, 7, 45, 4, 5, 5, (2, 2), (2, 2, 2, 2), (1, 1), 1),  # stride 2, left pad 2, odd input width
    (1, 2, 6, 64, 3, 3, 3, (1, 2), (0, 0, 1, 1), (1, 1), 1),  # horizontal stride 2 only, no left pad
    (1, 2, 9, 33, 3, 2, 2, (3, 2), (1, 3, 0, 0), (1, 1), 1),  # strides 3 x 2, left pad 3, input width 33
    (1, 4, 8, 36, 5, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation 2: output rows of 36
    (1, 3, 1, 100, 9, 1, 5, (1, 1), (0, 2, 0, 2), (1, 1), 1),  # 1-D k5 (Conv1d as a 1-row Conv2d)
    (1, 8, 1, 83, 6, 1, 3, (1, 2), (0, 1, 0, 1), (1, 1), 2),  # 1-D stride 2: 42 outputs
    (1, 2, 3, 24, 3, 3, 2, (1, 1), (1, 0, 1, 1), (1, 1), 1),  # 3 x 24 = 72: a last panel of 8 pixels
    (1, 64, 6, 30, 70, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # K = 576, M not a multiple of the 6-row tile
    (2, 16, 9, 23, 32, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1 direct path
    (1, 3, 5, 18, 4, 1, 1, (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 1x1 with padding: phase planes
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_grid_conv_signed(kernel, case, rng):
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (m, c // g, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_grid_conv_nonneg_symmetric_weights(kernel, case, rng):
    # Post-ReLU inputs with their largest value and weights in [-127, 127] (the AVX2 product without the sign step),
    # on two threads (panels split between tasks).
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = rng.integers(0, 128, (n, c, h, w), dtype=np.int8)
    x.reshape(-1)[: max(1, x.size // 4)] = 127
    wt = np.maximum(int8_data(rng, (m, c // g, kh, kw), extreme=0.3), -127).astype(np.int8)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel, threads=2)


@pytest.mark.parametrize("kernel", KERNELS)
def test_grid_conv_every_row_width(kernel):
    # Output widths 14 to 70 (below and above the 16-pixel chunk, around the 64-pixel panel) on 3x3 pad 1: every
    # position of a row boundary inside a panel; the input's values differ per pixel, so a pixel packed from the
    # wrong place shows.
    rng = np.random.default_rng(7)
    for w in range(14, 71):
        h = int(rng.integers(1, 5))
        x = int8_data(rng, (1, 3, h, w))
        wt = int8_data(rng, (5, 3, 3, 3))
        got = _C.conv2d(x, wt, None, pads=[1, 1, 1, 1], kind="raw", kernel=kernel)
        assert_bitexact(got, ref.conv2d_acc(x, wt, None, (1, 1), (1, 1, 1, 1), (1, 1), 1).astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_grid_conv_some_panels_signed(kernel, case, rng):
    # Non-negativity is proven per 64-pixel panel from the packed bytes: a non-negative input with a few negative
    # values (one in the middle of the output, one at the end) mixes panels of the cheaper AVX2 product with
    # panels of the sign-step one in one call.
    n, c, h, w, m, kh, kw, g = *case[:7], case[10]
    x = rng.integers(0, 128, (n, c, h, w), dtype=np.int8)
    x[0, 0, h // 2, w // 2] = -128
    x[-1, -1, -1, -1] = -1
    wt = np.maximum(int8_data(rng, (m, c // g, kh, kw), extreme=0.3), -127).astype(np.int8)
    b = rng.integers(-5000, 5000, m).astype(np.int32)
    check_conv_epilogues(x, wt, b, case, kernel)
