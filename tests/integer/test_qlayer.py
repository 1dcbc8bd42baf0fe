"""Integer-mode layers (ortquant.integer QConv / QGemm) against the numpy reference, bit for bit, on every ISA path.

The contract (docs/ops.md "Integer mode"): activation codes exactly as QONNX Quant computes q - zeropt, the sum
exact, the output float32(float64(acc) * S[j] + B[j]). The reference computes the sum in int64 with numpy and the
rescale with numpy float64, independently of the C++.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import SPECIAL_F32
from ortquant import kernels
from ortquant.reference import integer as ref
from ortquant.reference.qonnx import ROUNDING_MODES

ISAS = kernels.supported_isas()  # also selects the engine kernel: avx512vnni and avxvnni run their GEMM paths
GEMM_KERNELS = ["scalar", "avx2", "avxvnni", "avx512vnni"]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _need_kernel(kernel: str) -> None:
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")


def _acts(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Activations over the whole quantizer range and beyond, with exact ties and special values."""
    x = (rng.standard_normal(shape) * 60 * scale).astype(np.float32)
    flat = x.reshape(-1)
    n = min(flat.size // 4, 40)
    flat[:n] = ((np.arange(n) - n // 2) + 0.5).astype(np.float32) * np.float32(scale)  # ties
    specials = SPECIAL_F32[np.isfinite(SPECIAL_F32)]
    flat[n : n + specials.size] = specials
    return x


ACT_CASES = [
    # bits, signed, narrow, zeropt
    (8, True, False, 0.0),
    (8, True, True, 0.0),
    (8, False, False, 0.0),  # codes 0..255: offset 128
    (8, False, False, 130.0),  # asymmetric, codes -130..125: offset
    (4, False, False, 0.0),
    (4, True, True, 0.0),
    (2, True, False, -1.0),
    (3, False, True, 2.0),
    (1, False, False, 0.0),
    (1, True, False, 0.0),  # signed 1-bit: bipolar case of Quant
]


@pytest.mark.parametrize("mode", ROUNDING_MODES)
@pytest.mark.parametrize("bits,signed,narrow,zeropt", ACT_CASES)
def test_codes_match_quant_formula(isa, mode, bits, signed, narrow, zeropt):
    rng = np.random.default_rng(bits * 31 + len(mode))
    scale = 0.0625 if bits % 2 else 0.0371
    x = _acts(rng, (3, 97), scale)
    act = {"scale": scale, "zeropt": zeropt, "bits": bits, "signed": signed, "narrow": narrow, "rounding_mode": mode}
    codes, offset = kernels.integer_codes(x, **act)
    want = ref.act_codes(x, **act)
    np.testing.assert_array_equal(codes.astype(np.int64) + offset, want)


@pytest.mark.parametrize("scale", [2.0**-20, 0.5, 2.0**-126, 2.0**-127, 2.0**126, 2.0**127, 3 * 2.0**-10])
@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "ROUND_TO_ZERO"])
def test_power_of_two_scales_give_the_division_s_codes(isa, scale, mode):
    # The SIMD paths compute x / s as x * (1 / s) for a power-of-two s whose reciprocal is normal; the extremes
    # (a subnormal reciprocal, a subnormal x / s) must still give the codes of the division.
    rng = np.random.default_rng(5)
    s32 = np.float32(scale)
    x = np.concatenate([
        (rng.standard_normal(300) * 40).astype(np.float32) * s32,
        np.array([1e-45, -1e-45, 1.2e-38, -3e-39, 0.0, -0.0, 3.4e38, -3.4e38], np.float32),
        ((np.arange(64) - 32) + 0.5).astype(np.float32) * s32,
    ]).astype(np.float32)  # fmt: skip
    act = {"scale": float(s32), "zeropt": 0.0, "bits": 8, "signed": True, "narrow": False, "rounding_mode": mode}
    codes, offset = kernels.integer_codes(x, **act)
    np.testing.assert_array_equal(codes.astype(np.int64) + offset, ref.act_codes(x, **act))


def test_nan_quantizes_to_zero_and_bipolar_sign():
    x = np.array([np.nan, 0.0, -0.0, -1e-30, 3.0, -np.inf, np.inf], dtype=np.float32)
    codes, off = kernels.integer_codes(x, scale=0.5, zeropt=0.0, bits=4, signed=False)
    assert off == 0
    np.testing.assert_array_equal(codes, [0, 0, 0, 0, 6, 0, 15])
    codes, _ = kernels.integer_codes(x, scale=0.5, bipolar=True)
    np.testing.assert_array_equal(codes, [-1, 1, 1, -1, 1, -1, 1])  # x / s >= 0 (NaN compares false)


def _channel_params(rng: np.random.Generator, n: int, act_scale: float) -> tuple[np.ndarray, np.ndarray]:
    w_scale = (0.001 + rng.random(n) * 0.02).astype(np.float32)
    s = np.float64(np.float32(act_scale)) * w_scale.astype(np.float64)
    b = rng.standard_normal(n) * 0.3
    return s, b


LAYER_ACTS = [
    {"bits": 4, "signed": False},
    {"bits": 8, "signed": False},  # offset 128 (and explicit padding in the convolution)
    {"bits": 8, "signed": True, "narrow": True, "rounding_mode": "HALF_UP"},
    {"bits": 6, "signed": False, "zeropt": 17.0, "rounding_mode": "FLOOR"},
    {"bipolar": True},
]


@pytest.mark.parametrize("act", LAYER_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qgemm_matches_reference_bitwise(isa, act, kernel):
    _need_kernel(kernel)
    rng = np.random.default_rng(7)
    rows, k, n = 5, 300, 70
    act = {"scale": 0.043, **act}
    x = _acts(rng, (rows, k), 0.043)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    s, b = _channel_params(rng, n, 0.043)
    got = kernels.qgemm(x, w, s, b, kernel=kernel, relu=kernel == "scalar", **act)
    want = ref.qgemm(x, w, s, b, relu=kernel == "scalar", **act)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


CONV_CASES = [
    # (n, c, h, w), (m, kh, kw), strides, pads, dilations, group
    ((2, 3, 11, 9), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 12, 12), (32, 3, 3), (2, 2), (1, 0, 2, 1), (1, 1), 1),
    ((1, 8, 10, 10), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),  # depthwise
    # depthwise, rows of 16+ columns with 8-bit weights: on AVX-512 VNNI the stride-1 row kernel's int32 sums
    # beyond the int16 bound of the AVX2 one (which takes the block here); a 5x5 kernel: two tap groups per row
    ((1, 16, 12, 40), (16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16),
    ((2, 16, 9, 21), (16, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 16),
    ((1, 8, 9, 9), (4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    ((1, 4, 13, 13), (6, 3, 3), (1, 2), (2, 2, 2, 2), (2, 2), 1),
    ((3, 8, 7, 9), (6, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),  # images x groups: the sink's (b, g) offsets
    # 1x1 layers of at most 4 input channels: sums computed straight (QConv::run_small_k), pieces of 1024 pixels
    ((2, 3, 37, 41), (5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 4, 9, 7), (9, 1, 1), (1, 1), (0, 0, 0, 0), (2, 2), 1),
    ((2, 1, 3, 5), (3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 3, 12, 10), (4, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided: the engine
]


@pytest.mark.parametrize("act", LAYER_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("relu", [False, True])
def test_qconv_matches_reference_bitwise(isa, act, case, relu):
    xs, (m, kh, kw), st, pa, di, group = CONV_CASES[case]
    rng = np.random.default_rng(case)
    act = {"scale": 0.021, **act}
    x = _acts(rng, xs, 0.021)
    w = rng.integers(-128, 128, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _channel_params(rng, m, 0.021)
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# 1x1 layers of at most 4 input channels (QConv::run_small_k): the vector paths sum an output in int16 when 128 *
# sum_c |w| <= 32767, else in int32. Outputs on both sides of that bound (sum |w| 255 and 256, the inputs' codes
# at -128 and 127), small and full-range weights, pixel counts that leave a tail of fewer than 16 and span several
# pieces of 1024.
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("hw", [(3, 7), (37, 41), (33, 64)])
def test_qconv_small_k_int16_sums_match_reference_bitwise(isa, k, hw):
    rng = np.random.default_rng(800 + k)
    act = {"scale": 0.021, "bits": 8, "signed": True}
    x = _acts(rng, (2, k, *hw), 0.021)
    x[0, :, 0, :] = -200.0  # codes -128
    x[1, :, 0, :] = 200.0  # codes 127
    edge = [[127, 127, 1, 0], [127, 127, 2, 0], [-127, -128, 0, 0], [255 // k] * 4, [-(256 // k + 1)] * 4]
    w = np.concatenate(
        [
            np.array([row[:k] for row in edge], np.int64).clip(-128, 127),
            rng.integers(-8, 8, (6, k)),
            rng.integers(-128, 128, (3, k)),
        ]
    ).astype(np.int8)[:, :, None, None]
    s, b = _channel_params(rng, w.shape[0], 0.021)
    got = kernels.qconv(x, w, s, b, **act)
    want = ref.qconv(x, w, s, b, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Depthwise layers (one input channel per output) whose padding code is not 0 keep the engine's pads: the engine
# pads with the code 0 and the sums of the border outputs get the padding code times the weights of their padding
# taps (Conv2d::add_pad_sums). Every geometry of the border: asymmetric pads, strides, dilations, pads as wide as the
# kernel or the image, a channel multiplier (the per-plane kernel), several bands, two tap groups per kernel row.
DW_PAD_CASES = [
    # (n, c, h, w), (m, kh, kw), strides, pads, dilations
    ((1, 8, 20, 37), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 8, 19, 33), (8, 3, 3), (1, 1), (2, 0, 1, 3), (1, 1)),
    ((2, 8, 21, 40), (8, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((1, 4, 6, 7), (4, 5, 5), (1, 1), (4, 4, 4, 4), (2, 2)),
    ((1, 4, 9, 11), (8, 3, 3), (1, 1), (1, 2, 1, 0), (1, 1)),  # two outputs per channel
    ((1, 2, 4, 4), (2, 3, 3), (1, 1), (3, 3, 3, 3), (1, 1)),  # rows and columns of padding only
    ((2, 16, 70, 64), (16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # bands of rows
    ((1, 16, 12, 30), (16, 3, 5), (1, 1), (1, 2, 1, 2), (1, 1)),  # two tap groups per kernel row
    ((1, 8, 17, 24), (8, 3, 3), (1, 2), (0, 1, 2, 1), (2, 1)),
]
DW_PAD_ACTS = [
    {"bits": 4, "signed": True},  # the code of 0 is 8
    {"bits": 3, "signed": False, "narrow": True, "zeropt": 2.0},
    {"bits": 8, "signed": False, "zeropt": 130.0},
]


@pytest.mark.parametrize("act", DW_PAD_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(DW_PAD_CASES)))
def test_qconv_depthwise_padding_code_matches_reference_bitwise(isa, act, case):
    xs, (m, kh, kw), st, pa, di = DW_PAD_CASES[case]
    rng = np.random.default_rng(300 + case)
    act = {"scale": 0.021, **act}
    x = _acts(rng, xs, 0.021)
    w = rng.integers(-128, 128, (m, 1, kh, kw)).astype(np.int8)
    s, b = _channel_params(rng, m, 0.021)
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=xs[1], **act)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=xs[1], **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Depthwise layers whose weights are small enough for the int16 row kernel with any int8 codes (128 * sum |w| <=
# 32767): codes of every sign and every padding code, among them -128 (an unsigned 8-bit quantizer with zero point
# 0 stores a - 128), and fewer than 8 channels (the row kernel instead of the plane kernel).
DW_SMALL_W_CASES = [
    # (n, c, h, w), kh, kw, pads
    ((1, 3, 24, 40), 3, 3, (1, 1, 1, 1)),
    ((2, 5, 9, 17), 5, 5, (2, 2, 2, 2)),
    ((1, 16, 18, 33), 3, 3, (1, 2, 0, 1)),
    ((1, 1, 70, 48), 3, 3, (1, 1, 1, 1)),
]
DW_SMALL_W_ACTS = [
    {"bits": 8, "signed": False},  # stored a - 128: the padding code -128
    {"bits": 8, "signed": True},
    {"bits": 4, "signed": True},
    {"bits": 6, "signed": False, "zeropt": 3.0},
]


@pytest.mark.parametrize("act", DW_SMALL_W_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(DW_SMALL_W_CASES)))
def test_qconv_depthwise_small_weights_any_codes_match_reference_bitwise(isa, act, case):
    xs, kh, kw, pa = DW_SMALL_W_CASES[case]
    rng = np.random.default_rng(700 + case)
    act = {"scale": 0.021, **act}
    x = _acts(rng, xs, 0.021)
    w = rng.integers(-8, 8, (xs[1], 1, kh, kw)).astype(np.int8)
    s, b = _channel_params(rng, xs[1], 0.021)
    for relu in (False, True):
        got = kernels.qconv(x, w, s, b, strides=(1, 1), pads=pa, group=xs[1], relu=relu, **act)
        want = ref.qconv(x, w, s, b, strides=(1, 1), pads=pa, group=xs[1], relu=relu, **act)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Outputs of more than 1 MiB of int32 sums run in bands of output rows (QConv::run_bands): each band copies its
# input rows (with the halo of a 3x3 kernel, the padding rows at the image's edges, a last short band; a plain 1x1
# layer reads them in place) and rescales in cache. Shapes as in hls4ml's separable convolutions (few channels,
# large images), scaled down.
BAND_CASES = [
    # (n, c, h, w), (m, kh, kw), strides, pads, dilations, group, act
    ((1, 8, 203, 200), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8, {"bits": 4, "signed": True}),  # depthwise
    ((2, 3, 131, 128), (16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, {"bits": 4, "signed": True}),  # 1x1, K = 3
    ((1, 16, 130, 128), (16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, {"bits": 8, "signed": True}),  # offset 0
    # A plain 1x1 layer reads each band's rows in place (planes h * w apart): two images, a short last band.
    ((2, 40, 75, 80), (48, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, {"bits": 4, "signed": True}),
    # A 1x1 layer with padding copies its bands (padded with the code of 0).
    ((1, 20, 90, 100), (32, 1, 1), (1, 1), (1, 2, 0, 1), (1, 1), 1, {"bits": 4, "signed": True}),
    ((1, 4, 301, 300), (16, 3, 3), (2, 2), (2, 1, 2, 2), (2, 2), 2, {"bits": 8, "signed": False}),  # strided
    ((1, 3, 400, 400), (3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, {"bits": 3, "signed": False, "zeropt": 2.0}),
]


@pytest.mark.parametrize("case", range(len(BAND_CASES)))
@pytest.mark.parametrize("relu", [False, True])
def test_qconv_large_output_in_bands_matches_reference_bitwise(isa, case, relu):
    xs, (m, kh, kw), st, pa, di, group, act = BAND_CASES[case]
    rng = np.random.default_rng(100 + case)
    act = {"scale": 0.037, **act}
    x = _acts(rng, xs, 0.037)
    w = rng.integers(-8, 8, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _channel_params(rng, m, 0.037)
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    assert got.size * 4 > 1 << 20  # the banded path
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _shifted_weights(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """8-bit unsigned weights with a zero point per output channel, as an asymmetric quantizer stores them: codes
    q - z in [-255, 255], each channel spanning at most 256 values. Returns (codes, int8 codes - shift, shift)."""
    m = shape[0]
    q = rng.integers(0, 256, shape).astype(np.int64)
    q[0] = rng.integers(200, 256, shape[1:])  # a channel far from 0: every code positive
    z = rng.integers(0, 256, m).astype(np.int64)
    z[0] = 0
    if m > 1:
        z[1] = 255  # every code q - z <= 0
    codes = q - z.reshape((m,) + (1,) * (len(shape) - 1))
    hi = codes.reshape(m, -1).max(axis=1)
    shift = hi - 127
    stored = codes - shift.reshape((m,) + (1,) * (len(shape) - 1))
    assert stored.min() >= -128 and stored.max() <= 127
    assert np.abs(codes).max() > 127  # wider than int8: what the shift is for
    return codes, stored.astype(np.int8), shift


# Weight codes wider than int8 whose every output channel spans at most 256 values (uint8 weights with per-channel
# zero points) run on the engine as int8 codes minus a per-channel shift, the shift times each window's sum of
# input codes added back (QConv's w_shift): every engine path (the GEMM, 1x1 small-K sums, depthwise, bands, the
# padded copy of offset codes) against the reference on the unshifted codes.
SHIFT_CASES = [
    *CONV_CASES,
    ((1, 8, 203, 200), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),  # depthwise in bands
    ((1, 16, 130, 128), (16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # bands of rows
]
SHIFT_ACTS = [
    {"bits": 8, "signed": False, "zeropt": 130.0},  # asymmetric activations too (offset codes, explicit padding)
    {"bits": 8, "signed": True},
    {"bits": 4, "signed": False},
    {"bits": 3, "signed": False, "narrow": True, "zeropt": 2.0},
]


@pytest.mark.parametrize("act", SHIFT_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("case", range(len(SHIFT_CASES)))
def test_qconv_shifted_weights_match_reference_bitwise(isa, act, case):
    xs, (m, kh, kw), st, pa, di, group = SHIFT_CASES[case]
    rng = np.random.default_rng(500 + case)
    act = {"scale": 0.021, **act}
    x = _acts(rng, xs, 0.021)
    codes, stored, shift = _shifted_weights(rng, (m, xs[1] // group, kh, kw))
    s, b = _channel_params(rng, m, 0.021)
    s = s / 64  # sums up to 255 * 255 * K: keep the outputs in a moderate range
    want = ref.qconv(x, codes, s, b, strides=st, pads=pa, dilations=di, group=group, **act)
    for kernel in ["auto", "scalar"]:
        got = kernels.qconv(x, stored, s, b, strides=st, pads=pa, dilations=di, group=group, kernel=kernel,
                            w_shift=shift, **act)  # fmt: skip
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("act", SHIFT_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qgemm_shifted_weights_match_reference_bitwise(isa, act, kernel):
    _need_kernel(kernel)
    rng = np.random.default_rng(17)
    rows, k, n = 7, 300, 37
    act = {"scale": 0.043, **act}
    x = _acts(rng, (rows, k), 0.043)
    codes, stored, shift = _shifted_weights(rng, (n, k))
    s, b = _channel_params(rng, n, 0.043)
    s = s / 64
    got = kernels.qgemm(x, stored, s, b, kernel=kernel, relu=True, w_shift=shift, **act)
    want = ref.qgemm(x, codes, s, b, relu=True, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(kernels.qgemm(x, stored, s, b, kernel=kernel, relu=True, **act), got)


def test_qconv_shift_is_not_ignored():
    # the same stored codes without the shift give other values: the test above can fail
    rng = np.random.default_rng(9)
    x = _acts(rng, (1, 3, 8, 8), 0.05)
    _codes, stored, shift = _shifted_weights(rng, (4, 3, 3, 3))
    s, b = _channel_params(rng, 4, 0.05)
    act = {"scale": 0.05, "bits": 8, "signed": False}
    with_shift = kernels.qconv(x, stored, s, b, pads=(1, 1, 1, 1), w_shift=shift, **act)
    without = kernels.qconv(x, stored, s, b, pads=(1, 1, 1, 1), **act)
    assert not np.array_equal(with_shift, without)


@pytest.mark.parametrize(
    "shift,msg",
    [
        ([1, 2], "w_shift must have one value per output channel (4), got 2"),
        ([70000, 0, 0, 0], "is outside [-65536, 65536]"),
        ([65536, 65536, 65536, 65536], "could overflow"),
    ],
)
def test_qconv_bad_shift_is_refused(shift, msg):
    w = np.ones((4, 64, 3, 3), np.int8)
    s, b = np.ones(4), np.zeros(4)
    x = np.zeros((1, 64, 4, 4), np.float32)
    with pytest.raises(Exception, match=__import__("re").escape(msg)):
        kernels.qconv(x, w, s, b, w_shift=np.array(shift), scale=1.0, bits=8, signed=True)


def _qgemm_of_zeros_shifted(k: int) -> np.ndarray:
    x = np.zeros((1, k), np.float32)
    w_shift = np.array([65536])
    return kernels.qgemm(x, np.zeros((1, k), np.int8), np.ones(1), np.zeros(1), w_shift=w_shift, scale=1.0, bits=8)


def test_shift_bound_is_strict():
    # k weights of 0 + 65536: 128 * sum |w| = 2^31 for k = 256, one past int32, refused; 255 of them fit
    with pytest.raises(Exception, match="could overflow"):
        _qgemm_of_zeros_shifted(256)
    assert _qgemm_of_zeros_shifted(255).shape == (1, 1)


def test_every_isa_gives_the_same_bits():
    rng = np.random.default_rng(11)
    x = _acts(rng, (2, 16, 14, 14), 0.05)
    w = rng.integers(-8, 8, (24, 16, 3, 3)).astype(np.int8)
    s, b = _channel_params(rng, 24, 0.05)
    outs = []
    for isa_name, kernel in itertools.product(ISAS, ["auto", "scalar"]):
        kernels.set_isa(isa_name)
        try:
            outs.append(kernels.qconv(x, w, s, b, pads=(1, 1, 1, 1), kernel=kernel, scale=0.05, bits=4, signed=False))
        finally:
            kernels.set_isa("")
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))


@pytest.mark.parametrize(
    "act,msg",
    [
        ({"scale": 0.0}, "scale must be finite and positive"),
        ({"scale": float("nan")}, "scale must be finite and positive"),
        ({"scale": 1.0, "bits": 25}, "bit width must be 1 .. 24"),
        ({"scale": 1.0, "bits": 0}, "bit width must be 1 .. 24"),
        ({"scale": 1.0, "bits": 12}, "no int8 codes"),  # two byte planes: the layers take it, not integer_codes
        ({"scale": 1.0, "bits": 16, "signed": False, "zeropt": -1.0}, "span 65537 levels"),
        ({"scale": 1.0, "bits": 16, "signed": True, "zeropt": 40000.0}, "span 72769 levels"),
        ({"scale": 1.0, "bits": 24, "signed": False, "zeropt": -1.0}, "span 16777217 levels"),
        ({"scale": 1.0, "zeropt": 0.5}, "zero point must be an integer"),
        ({"scale": 1.0, "bits": 1, "signed": True, "zeropt": 1.0}, "zero point 0"),
    ],
)
def test_bad_activation_quantizers_raise(act, msg):
    with pytest.raises(ValueError, match=msg):
        kernels.integer_codes(np.zeros(3, np.float32), **act)


def test_bad_channel_params_raise():
    w = np.zeros((4, 8), np.int8)
    with pytest.raises(ValueError, match="4 values"):
        kernels.qgemm(np.zeros((1, 8), np.float32), w, np.ones(3), np.zeros(4), scale=1.0)
    with pytest.raises(ValueError, match="finite"):
        kernels.qgemm(np.zeros((1, 8), np.float32), w, np.array([1, 1, np.inf, 1.0]), np.zeros(4), scale=1.0)


# The AVX2 int16 path (gemm::Epilogue::x_max): activations whose values q - z (and 0, for padding) span at most 127
# are stored as codes in [0, 127] (integer::nonneg_codes: offset = min(q - z, 0)), multiplied without the sign step
# and their pair sums added in int16 for as many k-groups as the bound 2 * x_max * max|w| allows. Worst cases: every
# code at its largest and every weight at the extreme (-128 or +127, or the small bound of 4-bit weights), with K
# long enough to widen several times; the int16 sums reach the bound exactly.
NONNEG_CASES = [
    # activation quantizer, weight value range, input channels
    ({"bits": 4, "signed": False}, (-8, 7), 128),  # w4a4: 136 k-groups per widening, K = 1152 widens 3 times
    ({"bits": 4, "signed": False}, (-128, -128), 64),  # |w| = 128: 8 k-groups per widening
    ({"bits": 7, "signed": False}, (127, 127), 40),  # x_max 127, |w| 127: pair sum 32258, a widening every k-group
    ({"bits": 7, "signed": False}, (-128, -128), 40),  # pair sum -32512
    ({"bits": 6, "signed": False, "zeropt": -64.0}, (-128, 127), 33),  # codes 64 .. 127 with offset 0
    ({"bits": 2, "signed": False}, (-1, 1), 300),  # tiny bound: nothing can overflow (the longest run)
    ({"bits": 5, "signed": False, "zeropt": -3.0}, (0, 0), 16),  # all-zero weights
    ({"bits": 4, "signed": True}, (-128, -128), 64),  # values -8 .. 7: offset -8, stored 0 .. 15
    ({"bits": 7, "signed": True}, (127, 127), 40),  # values -64 .. 63: stored 0 .. 127, x_max 127
    ({"bits": 6, "signed": False, "zeropt": 9.0}, (-128, 127), 33),  # values -9 .. 54: offset -9
    ({"bits": 3, "signed": True, "narrow": True, "rounding_mode": "FLOOR"}, (-7, 7), 90),
    ({"bipolar": True}, (-128, -128), 200),  # values -1, +1: stored 0, 2 (63 k-groups per widening)
]


@pytest.mark.parametrize("act,wrange,cin", NONNEG_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("fill", ["max", "random"])
@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qconv_nonneg_int16_path_is_exact(act, wrange, cin, fill, kernel):
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    rng = np.random.default_rng(cin + len(act))
    scale = 0.03
    act = {"scale": scale, **act}
    shape = (2, cin, 7, 6)
    if fill == "max":
        x = np.full(shape, 1e6, np.float32)  # every code at its largest
        lo, hi = wrange
        w = np.full((13, cin, 3, 3), lo if lo < 0 else hi, np.int8)  # same-signed products: the bound is reached
    else:
        x = _acts(rng, shape, scale)
        w = rng.integers(wrange[0], wrange[1] + 1, (13, cin, 3, 3)).astype(np.int8)
    s, b = _channel_params(rng, 13, scale)
    got = kernels.qconv(x, w, s, b, pads=(1, 1, 1, 1), kernel=kernel, **act)
    want = ref.qconv(x, w, s, b, pads=(1, 1, 1, 1), **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if fill == "max" and wrange != (0, 0):  # the exact sums are large: an int16 overflow would show
        assert np.abs(want).max() > 0


@pytest.mark.parametrize("act,wrange,cin", NONNEG_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("fill", ["max", "random"])
@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qgemm_nonneg_int16_path_is_exact(act, wrange, cin, fill, kernel):
    """The rows orientation's int16 path (LinearInt-shaped QGemm): 7 rows (a 6-row and a 1-row pass), 70 outputs
    (16-lane passes and an 8-lane tail), K = 9 * cin (the convolution cases' reduction lengths)."""
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    rng = np.random.default_rng(cin + 7 * len(act))
    scale = 0.03
    act = {"scale": scale, **act}
    rows, k, n = 7, 9 * cin, 70
    if fill == "max":
        x = np.full((rows, k), 1e6, np.float32)
        lo, hi = wrange
        w = np.full((n, k), lo if lo < 0 else hi, np.int8)
    else:
        x = _acts(rng, (rows, k), scale)
        w = rng.integers(wrange[0], wrange[1] + 1, (n, k)).astype(np.int8)
    s, b = _channel_params(rng, n, scale)
    got = kernels.qgemm(x, w, s, b, kernel=kernel, **act)
    want = ref.qgemm(x, w, s, b, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if fill == "max" and wrange != (0, 0):
        assert np.abs(want).max() > 0


# ---- 1-bit layers: XNOR-popcount -------------------------------------------------------------------------------

BIPOLAR_ACTS = [{"bipolar": True}, {"bits": 1, "signed": True}]  # BipolarQuant, and Quant's signed 1-bit case


def _unit_codes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, -1, 1).astype(np.int8)


def _signed_acts(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Random signs, plus the values whose sign a wrong quantizer gets wrong: +-0, tiny negatives whose x / s
    rounds to -0 (bit 1), NaN (bit 0), infinities."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, -1e-45, 1e-45, np.nan, np.inf, -np.inf], dtype=np.float32)
    flat[: min(specials.size, flat.size)] = specials[: min(specials.size, flat.size)]
    return x


def _assert_bit_kernel(op: str, kernel: str, x: np.ndarray, w: np.ndarray, s, b, **kw: object) -> None:
    """The layer on the bit kernel `kernel` equals the reference and the scalar int8 engine, bit for bit."""
    run, reference = (kernels.qconv, ref.qconv) if op == "conv" else (kernels.qgemm, ref.qgemm)
    got = run(x, w, s, b, kernel=kernel, **kw)
    np.testing.assert_array_equal(got.view(np.uint32), reference(x, w, s, b, **kw).view(np.uint32))
    np.testing.assert_array_equal(got.view(np.uint32), run(x, w, s, b, kernel="scalar", **kw).view(np.uint32))


@pytest.mark.parametrize("act", BIPOLAR_ACTS, ids=["bipolarquant", "quant1s"])
@pytest.mark.parametrize("k", [1, 63, 64, 65, 300, 64 * 40 + 1])  # the last: byte counts flushed (> 31 words)
def test_qgemm_xnor_matches_reference_and_engine(isa, act, k):
    rng = np.random.default_rng(k)
    rows, n = 7, 13  # n not a multiple of the kernel's 4 columns
    x = _signed_acts(rng, (rows, k), 0.3)
    w = _unit_codes(rng, (n, k))
    s, b = _channel_params(rng, n, 0.3)
    _assert_bit_kernel("gemm", "xnor", x, w, s, b, scale=0.3, **act)


@pytest.mark.parametrize("sign", [1, -1])
def test_xnor_all_mismatched_bits(isa, sign):
    """Every activation bit differs from every weight bit: each byte of each word counts 8, the byte counters'
    worst case (flushed before they overflow), over K = 64 * 100 + 3."""
    rng = np.random.default_rng(9)
    k = 64 * 100 + 3
    x = (np.abs(rng.standard_normal((3, k))) + 0.1).astype(np.float32) * sign
    w = np.full((10, k), -sign, dtype=np.int8)
    s, b = _channel_params(rng, 10, 0.3)
    got = kernels.qgemm(x, w, s, b, kernel="xnor", bipolar=True, scale=0.3)
    want = ref.qgemm(x, w, s, b, bipolar=True, scale=0.3)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


XNOR_CONV_CASES = [
    *CONV_CASES,
    # channels per group: exactly one word, one word and one bit, several words
    ((1, 64, 6, 6), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 65, 5, 7), (5, 3, 3), (2, 1), (0, 1, 1, 0), (1, 1), 1),
    ((1, 260, 4, 4), (6, 2, 2), (1, 1), (1, 1, 0, 0), (2, 1), 2),
    ((1, 4, 3, 3), (4, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),  # every pixel has padded taps
    ((1, 256, 5, 5), (9, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 36 words per pixel: flushed byte counts
]


def test_bit_kernels_are_taken_only_by_their_layers():
    rng = np.random.default_rng(5)
    x = _signed_acts(rng, (2, 40), 0.3)
    s, b = _channel_params(rng, 3, 0.3)
    w = _unit_codes(rng, (3, 40))
    kernels.qgemm(x, w, s, b, kernel="xnor", bipolar=True, scale=0.3)  # a 1-bit layer: no error
    w0 = w.copy()
    w0[1, 7] = 0  # one code that is not +-1
    with pytest.raises(Exception, match="needs a bipolar activation and weight codes all -1 or"):
        kernels.qgemm(x, w0, s, b, kernel="xnor", bipolar=True, scale=0.3)
    with pytest.raises(Exception, match="needs a bipolar activation"):  # activation not bipolar
        kernels.qgemm(x, w, s, b, kernel="xnor", bits=2, signed=True, scale=0.3)
    with pytest.raises(Exception, match="activation codes in \\[0, 3\\]"):  # 3-bit: codes up to 7
        kernels.qgemm(x, w, s, b, kernel="bitserial", bits=3, signed=False, scale=0.3)
    with pytest.raises(Exception, match="activation codes in \\[0, 3\\]"):  # bipolar takes XNOR
        kernels.qgemm(x, w, s, b, kernel="bitserial", bipolar=True, scale=0.3)
    np.testing.assert_array_equal(  # auto on the non-1-bit layer: the engine, still exact
        kernels.qgemm(x, w0, s, b, bipolar=True, scale=0.3).view(np.uint32),
        ref.qgemm(x, w0, s, b, bipolar=True, scale=0.3).view(np.uint32),
    )


# ---- binary weights x 1- to 2-bit activations: bit-serial ---------------------------------------------------------

SERIAL_ACTS = [
    {"bits": 1, "signed": False},  # codes 0, 1
    {"bits": 2, "signed": False},  # 0 .. 3
    {"bits": 2, "signed": True, "narrow": True},  # ternary -1, 0, 1: offset -1, codes 0 .. 2, padding code 1
    {"bits": 2, "signed": True},  # -2 .. 1: offset -2, padding code 2
    {"bits": 2, "signed": False, "zeropt": 1.0, "rounding_mode": "FLOOR"},  # a = q - 1 in -1 .. 2
]


@pytest.mark.parametrize("act", SERIAL_ACTS, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
@pytest.mark.parametrize("k", [1, 64, 65, 64 * 40 + 1])
def test_qgemm_bitserial_matches_reference_and_engine(isa, act, k):
    rng = np.random.default_rng(k + 3)
    x = _acts(rng, (6, k), 0.3) if k > 60 else (rng.standard_normal((6, k)) * 0.6).astype(np.float32)
    w = _unit_codes(rng, (11, k))
    s, b = _channel_params(rng, 11, 0.3)
    _assert_bit_kernel("gemm", "bitserial", x, w, s, b, scale=0.3, **act)


BIT_CONV_ACTS = [("xnor", a) for a in BIPOLAR_ACTS] + [("bitserial", a) for a in SERIAL_ACTS]


@pytest.mark.parametrize("kernel,act", BIT_CONV_ACTS, ids=lambda v: v if isinstance(v, str) else "-".join(
    f"{k}{x}" for k, x in v.items()))  # fmt: skip
@pytest.mark.parametrize("case", range(len(XNOR_CONV_CASES)))
def test_qconv_bit_kernels_match_reference_and_engine(isa, kernel, act, case):
    xs, (m, kh, kw), st, pa, di, group = XNOR_CONV_CASES[case]
    rng = np.random.default_rng(100 + case)
    x = _signed_acts(rng, xs, 0.2) if kernel == "xnor" else _acts(rng, xs, 0.2)
    w = _unit_codes(rng, (m, xs[1] // group, kh, kw))
    s, b = _channel_params(rng, m, 0.2)
    conv = {"strides": st, "pads": pa, "dilations": di, "group": group, "relu": case % 2 == 1}
    _assert_bit_kernel("conv", kernel, x, w, s, b, scale=0.2, **conv, **act)


def test_bitserial_all_ones_planes():
    """Every code 3 (both planes all ones) against weights all +1 and all -1: every byte counter at its worst case
    over K = 64 * 100 + 3, and the popcount(C_b) term at its largest."""
    rng = np.random.default_rng(8)
    k = 64 * 100 + 3
    x = np.full((2, k), 10.0, np.float32)  # clamps to code 3 (2-bit unsigned)
    w = np.concatenate([np.ones((5, k), np.int8), -np.ones((4, k), np.int8)])
    s, b = _channel_params(rng, 9, 0.3)
    got = kernels.qgemm(x, w, s, b, kernel="bitserial", bits=2, signed=False, scale=0.3)
    want = ref.qgemm(x, w, s, b, bits=2, signed=False, scale=0.3)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# Activations of 9 to 24 bits (ActQuant::wide): the codes split into two (three from 17 bits) int8 byte planes, the
# engine run on each with the same weights, the sums combined exactly. Signed / unsigned, narrow, zero points that
# move the stored values (offset) and the padding's planes.
WIDE_ACTS = [
    {"bits": 12, "signed": False},
    {"bits": 12, "signed": True, "zeropt": 100.0, "rounding_mode": "FLOOR"},
    {"bits": 16, "signed": False},  # offset 32768: padding in the lowest stored value
    {"bits": 16, "signed": True, "narrow": True, "rounding_mode": "HALF_EVEN"},
    {"bits": 16, "signed": False, "zeropt": 40000.0},  # values in [-40000, 25535]
    {"bits": 16, "signed": True, "zeropt": -5.0, "rounding_mode": "UP"},  # values in [-32763, 32772]: offset 5
    {"bits": 9, "signed": False, "zeropt": 3.0, "rounding_mode": "CEIL"},
    # 17 to 24 bits: three byte planes
    {"bits": 18, "signed": True},
    {"bits": 17, "signed": False},  # values in [0, 131071]: offset 65536
    {"bits": 24, "signed": False},  # offset 2^23: padding in the lowest stored value
    {"bits": 24, "signed": True, "narrow": True, "rounding_mode": "HALF_EVEN"},
    {"bits": 20, "signed": True, "zeropt": -300.0, "rounding_mode": "FLOOR"},
    {"bits": 24, "signed": True, "zeropt": 65536.0, "rounding_mode": "UP"},  # [-8454144, 8323071]: offset -65536
]


def _wide_acts(rng: np.random.Generator, shape: tuple[int, ...], scale: float, act: dict) -> np.ndarray:
    """Activations over the whole range of a wide quantizer and beyond (clamped), exact ties, special values."""
    bits, signed, z = act["bits"], act.get("signed", True), act.get("zeropt", 0.0)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    span = hi - lo
    q = rng.uniform(lo - 0.05 * span, hi + 0.05 * span, shape)
    x = ((q - z) * scale).astype(np.float32)
    flat = x.reshape(-1)
    n = min(flat.size // 4, 40)
    flat[:n] = (rng.integers(lo, hi, n) - z + 0.5).astype(np.float32) * np.float32(scale)  # ties
    flat[n : n + 2] = np.float32((hi - z) * scale), np.float32((lo - z) * scale)  # both ends
    specials = SPECIAL_F32[np.isfinite(SPECIAL_F32)]
    flat[n + 2 : n + 2 + specials.size] = specials
    return x


def _wide_id(a: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in a.items())


@pytest.mark.parametrize("act", WIDE_ACTS, ids=_wide_id)
@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qgemm_wide_activation_matches_reference_bitwise(isa, act, kernel):
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    rng = np.random.default_rng(act["bits"] + 7 * len(act))
    rows, k, n = 6, 300, 37
    x = _wide_acts(rng, (rows, k), 0.013, act)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    s, b = _channel_params(rng, n, 0.013)
    act = {"scale": 0.013, **act}
    got = kernels.qgemm(x, w, s, b, kernel=kernel, relu=kernel == "avx2", **act)
    want = ref.qgemm(x, w, s, b, relu=kernel == "avx2", **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "bits,signed,xq,wq",
    [
        (16, False, 65535, -128),
        (16, True, -32768, -128),
        (12, False, 4095, 127),
        (24, False, 2**24 - 1, -128),
        (24, True, -(2**23), -128),
        (20, True, 2**19 - 1, 127),
    ],
)
def test_qgemm_wide_sum_beyond_int32_is_exact(isa, bits, signed, xq, wq):
    """Every activation at the range's end and every weight at int8's: the sum (K * 65535 * 128 ~ 2^38 for 16 bits)
    does not fit int32, each byte plane's does; the rescale of the combined sum equals the int64 reference."""
    k, n = 5000, 3
    x = np.full((2, k), np.float32(xq), np.float32)
    w = np.full((n, k), wq, np.int8)
    w[1, ::2] = -w[1, ::2]  # a second row whose sum nearly cancels
    s = np.array([1.0, 0.5, 2.0**-30])
    b = np.array([0.0, 0.25, -3.0])
    act = {"scale": 1.0, "bits": bits, "signed": signed}
    got = kernels.qgemm(x, w, s, b, **act)
    want = ref.qgemm(x, w, s, b, **act)
    assert abs(float(want[0, 0])) > 2.0**31  # the case the test is about
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


WIDE_CONV_CASES = [CONV_CASES[0], CONV_CASES[1], CONV_CASES[2], CONV_CASES[4], CONV_CASES[5]]


@pytest.mark.parametrize("act", WIDE_ACTS, ids=_wide_id)
@pytest.mark.parametrize("case", range(len(WIDE_CONV_CASES)))
def test_qconv_wide_activation_matches_reference_bitwise(isa, act, case):
    xs, (m, kh, kw), st, pa, di, group = WIDE_CONV_CASES[case]
    rng = np.random.default_rng(100 + case)
    x = _wide_acts(rng, xs, 0.021, act)
    w = rng.integers(-128, 128, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s, b = _channel_params(rng, m, 0.021)
    act = {"scale": 0.021, **act}
    relu = case % 2 == 1
    got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("kernel", GEMM_KERNELS)
def test_qconv_wide_activation_on_every_engine_kernel(isa, kernel):
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    rng = np.random.default_rng(5)
    act = {"bits": 16, "signed": False}
    x = _wide_acts(rng, (2, 5, 9, 8), 0.004, act)
    w = rng.integers(-8, 8, (6, 5, 3, 3)).astype(np.int8)
    s, b = _channel_params(rng, 6, 0.004)
    got = kernels.qconv(x, w, s, b, pads=(1, 2, 0, 1), kernel=kernel, scale=0.004, **act)
    want = ref.qconv(x, w, s, b, pads=(1, 2, 0, 1), scale=0.004, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_wide_binary_weights_stay_on_the_engine():
    """A 12-bit activation with weight codes all +-1: no bit kernel (they take codes of at most 2 bits), the engine
    on the byte planes gives the reference."""
    rng = np.random.default_rng(6)
    act = {"bits": 12, "signed": True}
    x = _wide_acts(rng, (4, 96), 0.01, act)
    w = np.where(rng.random((5, 96)) < 0.5, -1, 1).astype(np.int8)
    s, b = _channel_params(rng, 5, 0.01)
    with pytest.raises(Exception, match="activation codes in \\[0, 3\\]"):
        kernels.qgemm(x, w, s, b, kernel="bitserial", scale=0.01, **act)
    got = kernels.qgemm(x, w, s, b, scale=0.01, **act)
    np.testing.assert_array_equal(got.view(np.uint32), ref.qgemm(x, w, s, b, scale=0.01, **act).view(np.uint32))


# Power-of-two scales and float32 biases (QKeras / hls4ml layers): the float output's rescale runs in float32
# (Exact32: one fused multiply-add of the exact sum), which must give the float64 formula's bits. The biases put
# many results on float32 rounding ties (B = 2^14 + k / 2^9 with S = 2^-10: the sum's last bit is half an ulp) and
# large sums against small ones; one channel keeps a scale that is not a power of two (the float64 loop beside).
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize(
    "act", [{"bits": 4, "signed": True}, {"bits": 6, "signed": False}, {"bits": 8, "signed": True}]
)
def test_qconv_power_of_two_rescale_matches_float64_formula(isa, case, act):
    xs, (m, kh, kw), st, pa, di, group = CONV_CASES[case]
    rng = np.random.default_rng(200 + case)
    x = (rng.standard_normal(xs) * 0.6).astype(np.float32)
    w = rng.integers(-128, 128, (m, xs[1] // group, kh, kw)).astype(np.int8)
    s = 2.0 ** rng.integers(-14, -6, m).astype(np.float64)
    s[m // 2] = 2.0**-10
    ties = np.float64(2.0**14) + rng.integers(-64, 64, m) / 512.0  # float32 values whose ulp is 2^-9
    b = np.where(np.arange(m) % 3 == 0, ties, rng.standard_normal(m).astype(np.float32).astype(np.float64))
    b[1] = 0.0
    s[-1] = 0.0123  # not a power of two: this channel stays on the float64 loop
    for relu in (False, True):
        for kernel in ("auto", "scalar"):
            got = kernels.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu,
                                kernel=kernel, scale=0.125, **act)  # fmt: skip
            want = ref.qconv(x, w, s, b, strides=st, pads=pa, dilations=di, group=group, relu=relu, scale=0.125, **act)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("kernel", GEMM_KERNELS)
@pytest.mark.parametrize("all_pow2", [True, False])
def test_qgemm_power_of_two_rescale_matches_float64_formula(isa, kernel, all_pow2):
    """The dense layer's float32 rescale (every channel's Exact32 ok; one channel that is not keeps the whole layer
    on the float64 loop): the float64 formula's bits, rounding ties included, with and without relu."""
    from ortquant import _C

    if kernel not in _C.gemm_kernels():
        pytest.skip(f"this CPU has no {kernel}")
    rng = np.random.default_rng(31)
    rows, k, n = 7, 200, 37
    x = (rng.standard_normal((rows, k)) * 0.7).astype(np.float32)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    s = 2.0 ** rng.integers(-14, -6, n).astype(np.float64)
    b = np.where(np.arange(n) % 2 == 0, 2.0**14 + rng.integers(-64, 64, n) / 512.0, rng.standard_normal(n))
    b = b.astype(np.float32).astype(np.float64)
    if not all_pow2:
        s[5] = 0.0123
    for relu in (False, True):
        # signed 4-bit: stored codes shifted (offset -8), so the correction term is not 0
        for act in ({"bits": 4, "signed": True}, {"bits": 6, "signed": False}, {"bits": 8, "signed": True}):
            got = kernels.qgemm(x, w, s, b, kernel=kernel, relu=relu, scale=0.25, **act)
            want = ref.qgemm(x, w, s, b, relu=relu, scale=0.25, **act)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
