"""Integer mode's QConv on the engine's channel-quad path (a multiple of 4 input channels per group: conv.cc
reduces in the order (tap, channel) over planes interleaved by channel quads; on AVX2 the non-negative codes of
integer mode are read in place when output rows are a multiple of 8 pixels; a plain 1x1 layer takes the quads on
AVX2 only, for runs of at least 64 pixels, a multiple of 8), bit for bit against the numpy
reference of the contract (exact sums, one float64 rescale per output channel), on every ISA path and engine kernel.
Shapes of the small convolutional layers integer mode runs at batch 8 and their edges: M not a multiple of the
6-row tile, long reductions, batches, pads, stride 2, dilation, groups, output rows that are not a multiple of 8;
and large images, whose quad planes are built and reduced in bands of output rows."""

from __future__ import annotations

import numpy as np
import pytest

from ortquant import _C, kernels
from ortquant.reference import integer as ref

ISAS = kernels.supported_isas()  # also selects the engine kernel: avx512vnni and avxvnni run their GEMM paths
GEMM_KERNELS = ["auto", "scalar", "avx2", "avxvnni", "avx512vnni"]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


# (n, c, h, w), (m, kh, kw), strides, pads, dilations, group
CASES = [
    ((8, 16, 8, 8), (32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # batch 8, 8-pixel rows, M = 32 (2-row last tile)
    ((2, 64, 6, 16), (64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # K = 576, M = 64 (4-row last tile)
    ((2, 32, 10, 32), (7, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 72 k-groups: 56-pixel units across rows
    ((1, 8, 15, 31), (5, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride 2, 16-pixel rows
    ((2, 8, 9, 11), (6, 3, 3), (2, 2), (0, 1, 2, 1), (1, 1), 1),  # stride 2, 6-pixel rows: copied panels
    ((3, 16, 6, 8), (10, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),  # groups of 8 channels, images x groups
    ((1, 4, 12, 20), (3, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation 2, 20-pixel rows
    ((2, 4, 5, 3), (9, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 3-pixel rows
    ((1, 12, 7, 8), (4, 1, 1), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 1x1 with padding
    # Plain 1x1 layers (no padding, unit strides) on AVX2: the channel quads of all of the call's pixels, read in
    # place (at least 64 pixels, a multiple of 8), else the pixel panels gathered from the planes.
    ((2, 16, 8, 8), (24, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 64 pixels: quads, M = 24 (four 6-row tiles)
    ((1, 32, 5, 24), (7, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 120 pixels: quads, a 1-row last tile
    ((2, 24, 8, 8), (6, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),  # groups of 8 channels: quads per group
    ((1, 8, 7, 9), (5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 63 pixels: panels
    ((1, 64, 40, 256), (32, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # sums over 1 MiB: bands of 4 rows in place
    ((2, 128, 1, 120), (7, 1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 1),  # 1-D, 32 quads: planes in 3 bands of 40 outputs
    # Quad planes over 256 KiB: bands of output rows (Conv2d::run_raw_bands), each band's planes built from the input
    # rows it reads (halo rows, the padding rows at both ends), its sums rescaled per band.
    ((1, 64, 62, 64), (6, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 2 bands: 60 + 2 rows
    ((2, 32, 90, 88), (5, 3, 3), (1, 1), (2, 0, 1, 3), (1, 1), 1),  # batch 2, uneven pads, 89-pixel rows: 73 + 18
    ((1, 64, 96, 96), (4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),  # groups, dilation 2 (4 halo rows): 77 + 19
    ((1, 16, 130, 130), (4, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),  # 5x5: three bands of 63, 63, 4 rows
]

ACTS = [
    {"bits": 4, "signed": False},  # codes 0..15 (cnn4c2f)
    {"bits": 6, "signed": False},  # codes 0..63 (resnet_mini)
    {"bits": 4, "signed": True},  # values -8..7 stored 0..15 (offset -8): padding is code 8
    {"bits": 8, "signed": False},  # offset 128: signed codes, explicitly padded, copied panels
]


def _acts(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    x = (rng.standard_normal(shape) * 6 * scale * 4).astype(np.float32)
    x.reshape(-1)[:7] = np.array([np.nan, np.inf, -np.inf, 0.5 * scale, -0.5 * scale, 1e9, -0.0], np.float32)
    return x


def _params(rng: np.random.Generator, m: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    s = np.float64(np.float32(scale)) * (0.001 + rng.random(m) * 0.02)
    return s, rng.standard_normal(m) * 0.1


@pytest.mark.parametrize("act", ACTS, ids=lambda a: f"{a['bits']}{'s' if a['signed'] else 'u'}")
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("relu", [False, True])
def test_quad_qconv_matches_reference_bitwise(isa, act, case, relu):
    xs, (m, kh, kw), st, pa, di, group = CASES[case]
    rng = np.random.default_rng(50 + case)
    act = {"scale": 0.07, **act}
    x = _acts(rng, xs, 0.07)
    w = rng.integers(-8, 8, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _params(rng, m, 0.07)
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("kernel", GEMM_KERNELS)
@pytest.mark.parametrize(
    "act,wv",
    [
        ({"bits": 7, "signed": False}, -128),
        ({"bits": 7, "signed": False}, 127),
        ({"bits": 4, "signed": False}, -128),
        ({"bits": 2, "signed": False}, 1),
    ],
)
def test_quad_qconv_largest_sums_are_exact(kernel, act, wv):
    # Every code at its largest and every weight at one extreme: the int16 pair sums reach their bound (7-bit codes
    # with |w| = 128 widen after every k-group), and the exact sums are the largest the layer can produce.
    if kernel != "auto" and kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    cin = 300 if act["bits"] == 2 else 40
    x = np.full((2, cin, 5, 16), 1e6, np.float32)
    w = np.full((7, cin, 3, 3), wv, np.int8)
    s, b = np.full(7, 1.0), np.zeros(7)
    act = {"scale": 1.0, **act}
    got = kernels.qconv(x, w, s, b, pads=(1, 1, 1, 1), kernel=kernel, **act)
    want = ref.qconv(x, w, s, b, pads=(1, 1, 1, 1), **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.abs(want).max() == cin * 9 * (2 ** act["bits"] - 1) * abs(wv)


def _longest_safe_run(w: np.ndarray, x_max: int) -> tuple[int, int]:
    """(f, s): the longest run f of k-groups (aligned at multiples of f, in the engine's (tap, channel) reduction
    order) whose per-half sum of |w| times x_max fits int16, and that largest sum s, computed here independently of
    the library (PackedWeights::run_abs's rule)."""
    m, c = w.shape[:2]
    halves = np.abs(w.astype(np.int64)).reshape(m, c, -1).transpose(0, 2, 1).reshape(m, -1, 2, 2).sum(-1)
    kg, best = halves.shape[1], (1, 0)
    for f in range(1, min(128, kg) + 1):
        top = max(int(halves[:, g0 : g0 + f].sum(1).max()) for g0 in range(0, kg, f))
        if x_max * top <= 32767:
            best = (f, top)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quad_qconv_runs_between_widenings_follow_the_weights(isa, seed):
    # 6-bit codes at their largest against non-negative weights of varying size: the int16 sums between two widenings
    # grow as far as the per-run bound of these weights allows (more k-groups than 32767 / (2 * 63 * max|w|)), so a
    # run one k-group too long, or runs counted at other offsets than the kernel's, would wrap and differ here.
    rng = np.random.default_rng(seed)
    w = np.where(rng.random((10, 16, 3, 3)) < 0.2, 31, rng.integers(0, 4, (10, 16, 3, 3))).astype(np.int8)
    f, top = _longest_safe_run(w, 63)
    assert f > 32767 // (2 * 63 * 31) and 63 * top > 24000, (f, top)  # the bound is what limits these sums
    x = np.full((2, 16, 6, 16), 1e6, np.float32)
    x[1, :, 2:4] = -1.0  # code 0: rows without products
    s, b = np.full(10, 1.0), np.zeros(10)
    act = {"scale": 1.0, "bits": 6, "signed": False}
    got = kernels.qconv(x, w, s, b, pads=(1, 1, 1, 1), **act)
    want = ref.qconv(x, w, s, b, pads=(1, 1, 1, 1), **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Unit-stride channel-quad layers whose input rows are quantized straight into the quad planes (no codes tensor):
# pads wider than the kernel's reach and asymmetric, rows that are not a multiple of 16 pixels (the interleave's
# tail), groups with batches, dilation, a 1x3 kernel without pads, an input row narrower than the left pad.
FUSED_CASES = [
    ((2, 8, 7, 19), (5, 3, 3), (1, 1), (3, 0, 2, 4), (1, 1), 1),
    ((3, 8, 5, 40), (6, 3, 3), (1, 1), (1, 2, 1, 2), (1, 1), 2),
    ((2, 4, 3, 5), (2, 1, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 16, 4, 3), (4, 3, 3), (1, 1), (5, 5, 4, 6), (1, 1), 1),
    ((1, 12, 9, 17), (3, 3, 3), (1, 1), (2, 1, 2, 3), (2, 2), 3),
    ((8, 32, 16, 16), (32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
]

FUSED_ACTS = [
    {"bits": 4, "signed": False},
    {"bits": 4, "signed": False, "rounding_mode": "FLOOR"},
    {"bits": 5, "signed": False, "rounding_mode": "HALF_UP"},
    {"bits": 4, "signed": False, "zeropt": 3.0},  # offset -3: the padding code is 3 (padded before the engine)
    {"bits": 3, "signed": True, "narrow": True},
    {"bits": 8, "signed": True, "zeropt": -5.0},
]


@pytest.mark.parametrize("act", FUSED_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(FUSED_CASES)))
@pytest.mark.parametrize("kernel", ["auto", "scalar"])
def test_quad_rows_qconv_matches_reference_bitwise(isa, act, case, kernel):
    xs, (m, kh, kw), st, pa, di, group = FUSED_CASES[case]
    rng = np.random.default_rng(90 + case)
    scale = 0.25
    # Multiples of scale / 2: most values are rounding ties; then NaN, infinities, -0 and out-of-range values.
    x = (rng.integers(-40, 80, xs) * (scale / 2)).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30, 0.5 * scale, -0.5 * scale], np.float32)
    x.reshape(-1)[rng.choice(x.size, specials.size, replace=False)] = specials
    w = rng.integers(-8, 8, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _params(rng, m, scale)
    a = {"scale": scale, **act}
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, kernel=kernel, **a)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, **a)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Strided channel-quad layers, quantized straight into the stride-phase quad planes (only the phases some tap reads;
# a layer whose taps all read one row phase quantizes only those rows): 1x1 stride 2 with odd sizes and with pads,
# 3x3 stride 2 with odd sizes and asymmetric pads, unequal strides, stride 3 and 4 (pads wider than the stride, an
# input narrower than the stride), dilation 2 with stride 2 (every tap on row phase 0), a 2x2 stride-2 kernel,
# groups with batches, resnet_mini's two stride-2 layers at batch 8, and kernels that read one row or one column
# phase only.
STRIDED_CASES = [
    ((2, 8, 9, 11), (5, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((1, 4, 7, 33), (3, 1, 1), (2, 2), (1, 0, 2, 1), (1, 1), 1),
    ((2, 8, 15, 17), (6, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 8, 10, 13), (4, 3, 3), (2, 2), (0, 2, 1, 0), (1, 1), 1),
    ((2, 4, 9, 20), (3, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 8, 21), (3, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 1),
    ((2, 8, 11, 10), (4, 1, 2), (3, 3), (2, 1, 4, 2), (1, 1), 1),
    ((1, 4, 3, 2), (2, 1, 1), (4, 4), (5, 3, 2, 6), (1, 1), 1),
    ((1, 8, 13, 24), (5, 3, 3), (2, 2), (2, 2, 2, 2), (2, 2), 1),
    ((2, 4, 8, 16), (3, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((3, 16, 9, 12), (6, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2),
    ((3, 16, 9, 12), (6, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 2),
    ((8, 16, 32, 32), (32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((8, 16, 32, 32), (32, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((2, 8, 9, 13), (4, 3, 1), (2, 2), (1, 0, 1, 0), (1, 1), 1),  # all rows, every other column
    ((1, 4, 10, 15), (3, 1, 3), (2, 2), (0, 1, 1, 1), (1, 1), 1),  # every other row, all columns
    ((2, 4, 6, 19), (5, 1, 1), (1, 2), (0, 0, 0, 0), (1, 1), 1),
    ((1, 8, 14, 17), (3, 1, 1), (3, 3), (2, 2, 1, 1), (1, 1), 1),  # the first row and column read are 1
    ((2, 4, 5, 45), (3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride-2 phase rows of 22 and 23 codes
]


@pytest.mark.parametrize("act", FUSED_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(STRIDED_CASES)))
@pytest.mark.parametrize("kernel", ["auto", "scalar"])
def test_quad_strided_qconv_matches_reference_bitwise(isa, act, case, kernel):
    xs, (m, kh, kw), st, pa, di, group = STRIDED_CASES[case]
    rng = np.random.default_rng(130 + case)
    scale = 0.25
    # Rounding ties, then NaN, infinities, -0 and out-of-range values (on the rows a stride-2 layer reads, too).
    x = (rng.integers(-40, 80, xs) * (scale / 2)).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30, 0.5 * scale, -0.5 * scale], np.float32)
    x.reshape(-1)[rng.choice(x.size, specials.size, replace=False)] = specials
    x[0, 0, 0, :2] = specials[:2]
    w = rng.integers(-8, 8, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _params(rng, m, scale)
    a = {"scale": scale, **act}
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, kernel=kernel, **a)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, **a)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
