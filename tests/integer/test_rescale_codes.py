"""Integer mode's codes epilogue (integer::rescale_codes) against the numpy reference, bit for bit, on every ISA path.

A QConvCodes layer turns its int32 sums straight into the next quantizer's int8 codes. The SIMD paths compute most
codes in float32 from per-channel coefficients, take the exact formula for values within the error bound of a
rounding boundary, and resolve the ties of power-of-two channels exactly; the reference here is the formula itself
(numpy float64 rescale, float32 LeakyRelu, then QONNX Quant's steps in float32), written independently of the C++.
The cases aim at the boundaries: sums placed on and next to the values where the code changes, dense ranges of
sums on power-of-two scales (every tie of the mode), every rounding mode, Relu and LeakyRelu (dyadic and not).
"""

from __future__ import annotations

import numpy as np
import pytest

from ortquant import kernels
from ortquant.reference import integer as ref
from ortquant.reference.qonnx import ROUNDING_MODES

F32 = np.float32
ISAS = kernels.supported_isas()  # also selects the engine kernel: avx512vnni and avxvnni run their GEMM paths


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _reference(acc, corr, s, b, relu, leaky, act, offset, resid=None):
    v = ref.rescale(acc.astype(np.int64) + corr[:, None, None], s, b, axis=0, relu=relu and resid is None)
    if leaky is not None:
        v = np.where(v >= F32(0), v, F32(leaky) * v).astype(F32)
    if resid is not None:  # the residual, then the Relu (QConv's input R)
        v = (v + resid).astype(F32)
        v = np.where(v < F32(0), F32(0), v) if relu else v
    return ref.act_codes(v, **act) - offset


def _check(acc, corr, s, b, relu, leaky, act, nonneg=False, width=None, resid=None):
    bound = np.abs(acc.astype(np.int64)).reshape(acc.shape[0], -1).max(axis=1) + 3
    codes, offset = kernels.rescale_codes(acc, corr, s, b, bound, width=width, relu=relu, leaky=leaky, resid=resid,
                                          nonneg=nonneg, **act)  # fmt: skip
    w = acc.shape[2] if width is None else width
    want = _reference(acc[:, :, :w], corr, s, b, relu, leaky, act, offset, resid)
    assert codes.shape == want.shape
    bad = np.argwhere(codes.astype(np.int64) != want)
    assert bad.size == 0, (
        f"{len(bad)} codes differ, first at {tuple(bad[0])}: {codes[tuple(bad[0])]} != {want[tuple(bad[0])]}"
    )


QUANTS = [
    # bits, signed, narrow, zeropt
    (8, True, False, 0.0),
    (8, False, False, 0.0),
    (4, True, False, 0.0),
    (6, False, False, 0.0),
    (3, True, True, 0.0),
    (4, False, False, 3.0),
    (5, True, False, -2.0),
]
ACTS = ["none", "relu", "leaky", "leaky_dyadic"]


def _act_kw(bits, signed, narrow, zeropt, mode, scale):
    return {"scale": scale, "zeropt": zeropt, "bits": bits, "signed": signed, "narrow": narrow, "rounding_mode": mode}


def _activation(kind):
    return kind == "relu", {"leaky": 0.1, "leaky_dyadic": 13 / 128}.get(kind)


@pytest.mark.parametrize("kind", ACTS)
@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_sums_on_and_next_to_every_boundary(isa, mode, kind):
    # Channels with scales that are not powers of two: each boundary between two codes is a real number of sums;
    # the sums just below, on and above it, where float32 and the float64 reference part ways if anything does.
    rng = np.random.default_rng(len(mode) * 7 + len(kind))
    relu, leaky = _activation(kind)
    for bits, signed, narrow, zeropt in QUANTS:
        scale = float(F32(rng.uniform(0.01, 0.3)))
        act = _act_kw(bits, signed, narrow, zeropt, mode, scale)
        channels = 5
        s = rng.uniform(2e-4, 5e-3, channels) * rng.choice([-1.0, 1.0], channels)
        b = rng.uniform(-1.0, 1.0, channels)
        corr = rng.integers(-3000, 3000, channels)
        rows = []
        for j in range(channels):
            k = np.arange(-(2**bits) - 2, 2**bits + 3, dtype=np.float64)
            edges = np.concatenate([k + 0.5, k])  # nearest modes' and directed modes' boundaries, in q units
            slope = 1.0 if leaky is None else np.where(edges - zeropt < 0, leaky, 1.0)
            y_edge = (edges - zeropt) * scale / slope
            a0 = np.round((y_edge - b[j]) / s[j] - corr[j]).astype(np.int64)
            rows.append(np.concatenate([a0 - 1, a0, a0 + 1, rng.integers(-20000, 20000, 64)]))
        n = min(len(r) for r in rows)
        acc = np.stack([r[:n] for r in rows])[:, None, :].astype(np.int32)
        _check(acc, corr, s, b, relu, leaky, act)


@pytest.mark.parametrize("kind", ACTS)
@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_power_of_two_channels_every_tie(isa, mode, kind):
    # Power-of-two scales and dyadic biases: the reference is exact and lands on ties of the mode; the SIMD paths
    # take these channels as exact ones and must resolve every tie as the mode does.
    relu, leaky = _activation(kind)
    for bits, signed, narrow, zeropt in QUANTS:
        scale = 2.0**-4
        act = _act_kw(bits, signed, narrow, zeropt, mode, scale)
        s = np.array([2.0**-7, -(2.0**-6), 3 * 2.0**-9, 2.0**-5])
        b = np.array([0.0, 0.375, -1.25, 2.0**-8])
        corr = np.array([0, 17, -128 * 5, 3])
        acc = np.tile(np.arange(-2000, 2000, dtype=np.int32), (4, 1))[:, None, :]
        _check(acc, corr, s, b, relu, leaky, act)


@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "HALF_UP"])
def test_grid_layouts(isa, mode):
    # Rows of every length around the 8- and 32-value vector steps, strided (stride > width) and contiguous, and the
    # stored codes of a non-negative (offset) quantizer.
    rng = np.random.default_rng(3)
    for width in (1, 7, 8, 9, 31, 32, 33, 40, 64, 71):
        for extra in (0, 5):
            acc = rng.integers(-40000, 40000, (3, 4, width + extra)).astype(np.int32)
            s = rng.uniform(1e-4, 1e-3, 3)
            b = rng.uniform(-2, 2, 3)
            corr = rng.integers(-100, 100, 3)
            for nonneg in (False, True):
                act = _act_kw(4, False, False, 0.0, mode, 0.4)
                _check(acc, corr, s, b, False, None, act, nonneg=nonneg, width=width)
                act = _act_kw(8, False, False, 0.0, mode, 2.0**-3)
                _check(acc, corr, s * 0 + 2.0**-10, np.round(b * 8) / 8, True, None, act, nonneg=nonneg, width=width)


@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "CEIL", "HALF_UP", "HALF_DOWN", "ROUND_TO_ZERO"])
@pytest.mark.parametrize("relu", [False, True])
def test_residual_added_before_the_relu(isa, mode, relu):
    # QConv's residual input R: added to the rescaled values before the Relu and the quantizer. Residuals on a
    # quantizer's grid (what int8 codes R dequantize to), arbitrary floats, and residuals that put the sum on a
    # boundary of the output quantizer (within rounding); power-of-two channels (exact without R, not with it); a
    # LeakyRelu before R.
    rng = np.random.default_rng(len(mode) + 11 * relu)
    for bits, signed, narrow, zeropt in QUANTS:
        for scale, s0 in ((float(F32(0.173)), 1e-3), (2.0**-4, 2.0**-9)):
            act = _act_kw(bits, signed, narrow, zeropt, mode, scale)
            channels, n = 3, 200
            s = np.full(channels, s0) * np.array([1.0, -1.0, 3.0])
            b = np.array([0.0, 0.25, -0.5])
            corr = np.array([0, 64, -7])
            acc = rng.integers(-6000, 6000, (channels, 2, n)).astype(np.int32)
            grid = (rng.integers(-40, 40, (channels, 2, n)) * F32(0.0625)).astype(F32)
            floats = (rng.standard_normal((channels, 2, n)) * 2).astype(F32)
            y = ref.rescale(acc.astype(np.int64) + corr[:, None, None], s, b, axis=0).astype(np.float64)
            k = rng.integers(-(2**bits), 2**bits, y.shape) + rng.choice([0.0, 0.5], y.shape)  # q-unit boundaries
            edge = ((k - zeropt) * scale - y).astype(F32)
            up, down = np.nextafter(edge, F32(np.inf)), np.nextafter(edge, F32(-np.inf))
            for resid in (grid, floats, edge, up, down, np.zeros_like(grid)):
                _check(acc, corr, s, b, relu, None, act, resid=resid)
            _check(acc, corr, s, b, False, 0.1, act, resid=grid)


def test_large_sums_and_scales(isa):
    # Sums near the int32 limits (the channel bound past 2^24, where acc is not exact in float32), tiny and huge
    # rescale factors (every value clamped), a zero scale.
    rng = np.random.default_rng(9)
    acc = np.concatenate([
        rng.integers(-(2**31) + 1, 2**31 - 1, 200), np.array([-(2**31) + 1, 2**31 - 1, 0, 1, -1]),
        rng.integers(-(2**25), 2**25, 200),
    ]).astype(np.int32)[None, None, :]  # fmt: skip
    for s0, b0 in ((1e-9, 0.0), (3.7e-8, 0.3), (1e3, -5.0), (0.0, 0.7), (2.0**-24, 0.0)):
        for mode in ("ROUND", "CEIL", "HALF_DOWN"):
            act = _act_kw(8, True, False, 0.0, mode, 0.05)
            _check(acc, np.array([12345]), np.array([s0]), np.array([b0]), False, None, act)
            _check(acc, np.array([0]), np.array([s0]), np.array([b0]), False, 0.25, act)


def test_bound_is_checked():
    acc = np.full((1, 1, 8), 1000, dtype=np.int32)
    with pytest.raises(Exception, match="bound"):
        kernels.rescale_codes(acc, [0], [1e-3], [0.0], [999], scale=0.1, bits=8, signed=True)


# ---- Dense layers: sums in rows [rows, channels] (integer::rescale_codes_rows, QGemmCodes) ----------------------


def _check_rows(acc, corr, s, b, relu, act, nonneg=False):
    """The row layout's codes, vector loop and exact formula, against the reference; returns the vector flag."""
    bound = np.abs(acc.astype(np.int64)).max(axis=0) + 3
    v = ref.rescale(acc.astype(np.int64) + corr[None, :], s, b, axis=1, relu=relu)
    for fast in (True, False):
        codes, offset, vector = kernels.rescale_codes_rows(acc, corr, s, b, bound, relu=relu, nonneg=nonneg,
                                                           fast=fast, **act)  # fmt: skip
        want = ref.act_codes(v, **act) - offset
        assert codes.shape == want.shape
        bad = np.argwhere(codes.astype(np.int64) != want)
        assert bad.size == 0, (
            f"fast={fast}: {len(bad)} codes differ, first at {tuple(bad[0])}: {codes[tuple(bad[0])]} != "
            f"{want[tuple(bad[0])]}"
        )
    return vector


def _boundary_columns(rng, n, bits, zeropt, scale, s, b, corr):
    """Per channel: the sums just below, on and above every boundary of the quantizer, plus random ones."""
    cols = []
    for j in range(n):
        k = np.arange(-(2**bits) - 2, 2**bits + 3, dtype=np.float64)
        edges = np.concatenate([k + 0.5, k])
        a0 = np.round(((edges - zeropt) * scale - b[j]) / s[j] - corr[j]).astype(np.int64)
        cols.append(np.concatenate([a0 - 1, a0, a0 + 1, rng.integers(-20000, 20000, 16)]))
    m = min(len(c) for c in cols)
    return np.stack([c[:m] for c in cols], axis=1).astype(np.int32)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_rows_on_and_next_to_every_boundary(isa, mode, relu):
    # Channel counts around the 8-channel vector step (tails of 1..7 channels), every boundary of each channel's
    # codes in some row.
    rng = np.random.default_rng(len(mode) * 5 + relu)
    for bits, signed, narrow, zeropt in QUANTS:
        scale = float(F32(rng.uniform(0.01, 0.3)))
        act = _act_kw(bits, signed, narrow, zeropt, mode, scale)
        for n in (1, 5, 8, 13, 24):
            s = rng.uniform(2e-4, 5e-3, n) * rng.choice([-1.0, 1.0], n)
            b = rng.uniform(-1.0, 1.0, n)
            corr = rng.integers(-3000, 3000, n)
            acc = _boundary_columns(rng, n, bits, zeropt, scale, s, b, corr)
            vector = _check_rows(acc, corr, s, b, relu, act)
            # The modes whose boundaries do not depend on the sign take the vector loop.
            assert vector == (mode not in ("ROUND_TO_ZERO", "UP", "DOWN"))


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_rows_exact_and_inexact_channels_side_by_side(isa, mode, relu):
    # Power-of-two channels (exact: their ties resolved in the vector loop) next to channels that are not exact (their
    # integer u flagged for the exact formula) in the same 8-channel steps; dense sums hit every tie.
    for bits, signed, narrow, zeropt in QUANTS:
        act = _act_kw(bits, signed, narrow, zeropt, mode, 2.0**-4)
        s = np.array([2.0**-7, 1.37e-3, -(2.0**-6), 3 * 2.0**-9, -2.1e-3, 2.0**-5, 2.0**-8, 7.7e-4, 2.0**-6])
        b = np.array([0.0, 0.11, 0.375, -1.25, 0.5, 2.0**-8, 0.0, -0.3, 0.125])
        corr = np.array([0, 5, 17, -128 * 5, 3, 3, -9, 0, 44])
        acc = np.tile(np.arange(-1500, 1500, dtype=np.int32)[:, None], (1, len(s)))
        acc[:, 1::2] = acc[:, 1::2][::-1]  # the channels do not move together
        _check_rows(acc, corr, s, b, relu, act)


def test_rows_nonneg_codes_and_many_channels(isa):
    # The stored (offset) codes of a non-negative quantizer, one row and many rows, a layer wider than the exact
    # formula's buffer (2048 values).
    rng = np.random.default_rng(17)
    for rows, n in ((1, 64), (7, 3), (3, 2100), (300, 10)):
        acc = rng.integers(-40000, 40000, (rows, n)).astype(np.int32)
        s = rng.uniform(1e-4, 1e-3, n)
        b = rng.uniform(-2, 2, n)
        corr = rng.integers(-100, 100, n)
        for nonneg in (False, True):
            for mode in ("ROUND", "FLOOR", "HALF_UP"):
                _check_rows(acc, corr, s, b, False, _act_kw(4, False, False, 0.0, mode, 0.4), nonneg=nonneg)
                _check_rows(acc, corr, s, b, True, _act_kw(8, False, False, 0.0, mode, 0.05), nonneg=nonneg)


def test_rows_large_sums_and_scales(isa):
    # Sums near the int32 limits, tiny and huge factors (every value clamped), a zero scale.
    rng = np.random.default_rng(19)
    acc = np.concatenate([
        rng.integers(-(2**31) + 1, 2**31 - 1, 64), np.array([-(2**31) + 1, 2**31 - 1, 0, 1, -1]),
        rng.integers(-(2**25), 2**25, 64),
    ]).astype(np.int32).reshape(-1, 1)  # fmt: skip
    acc = np.tile(acc, (1, 3))
    for s0, b0 in ((1e-9, 0.0), (3.7e-8, 0.3), (1e3, -5.0), (0.0, 0.7), (2.0**-24, 0.0)):
        for mode in ("ROUND", "CEIL", "HALF_DOWN"):
            act = _act_kw(8, True, False, 0.0, mode, 0.05)
            _check_rows(acc, np.array([12345, 0, -7]), np.full(3, s0), np.full(3, b0), False, act)


def test_rows_bound_is_checked():
    acc = np.full((2, 3), 1000, dtype=np.int32)
    with pytest.raises(Exception, match="bound"):
        kernels.rescale_codes_rows(acc, [0, 0, 0], [1e-3] * 3, [0.0] * 3, [999] * 3, scale=0.1, bits=8, signed=True)


@pytest.mark.parametrize("mode", ["ROUND", "CEIL", "HALF_DOWN", "ROUND_TO_ZERO"])
def test_small_planes_all_channels_at_once(isa, mode):
    # A small image's planes (fewer than 64 values a channel) take the exact formula for many channels per call: more
    # channels than one call's buffer holds (2048 values: 34 planes of 60), strided rows, a LeakyRelu, a residual.
    rng = np.random.default_rng(len(mode))
    for channels, rows, width, stride in ((40, 6, 10, 12), (3, 1, 1, 1), (70, 7, 9, 9)):
        acc = rng.integers(-9000, 9000, (channels, rows, stride)).astype(np.int32)
        s = rng.uniform(2e-4, 2e-3, channels) * rng.choice([-1.0, 1.0], channels)
        b = rng.uniform(-1, 1, channels)
        corr = rng.integers(-500, 500, channels)
        act = _act_kw(4, True, False, 0.0, mode, 0.21)
        for relu, leaky in ((False, None), (True, None), (False, 0.1)):
            _check(acc, corr, s, b, relu, leaky, act, width=width)
        resid = (rng.standard_normal((channels, rows, width)) * 0.5).astype(F32)
        _check(acc, corr, s, b, True, None, act, width=width, resid=resid)


def test_empty_planes_and_rows(isa):
    # No value at all (zero columns, zero rows, zero channels): empty codes, no division by the plane's size.
    act = _act_kw(8, True, False, 0.0, "ROUND", 0.1)
    codes, _ = kernels.rescale_codes(np.zeros((3, 2, 5), np.int32), [0] * 3, [1e-3] * 3, [0.0] * 3, [10] * 3,
                                     width=0, **act)  # fmt: skip
    assert codes.shape == (3, 2, 0)
    codes, _ = kernels.rescale_codes(np.zeros((3, 0, 5), np.int32), [0] * 3, [1e-3] * 3, [0.0] * 3, [10] * 3, **act)
    assert codes.shape == (3, 0, 5)
    codes, _, _ = kernels.rescale_codes_rows(np.zeros((0, 4), np.int32), [0] * 4, [1e-3] * 4, [0.0] * 4, [10] * 4,
                                             **act)  # fmt: skip
    assert codes.shape == (0, 4)
    codes, _, _ = kernels.rescale_codes_rows(np.zeros((3, 0), np.int32), [], [], [], [], **act)
    assert codes.shape == (3, 0)
