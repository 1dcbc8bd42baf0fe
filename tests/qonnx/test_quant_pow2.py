"""Quant with power-of-two scales. The vector paths compute x / s as x * (1/s) when s = +-2^k with s and 1/s
normal (an exact reciprocal: both forms are the correctly rounded value of the same number). These tests hold
that to bit-exactness against the numpy reference (true division) on every ISA, across the whole exponent range,
on every class of float input, and at the edges where the shortcut must not be taken (subnormal reciprocal)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SPECIAL_F32, assert_bitexact, run_node
from ortquant import kernels
from ortquant.reference import qonnx as ref

ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
MODES = ["ROUND", "FLOOR", "HALF_UP", "UP"]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    if kernels.active_isa() != request.param:
        kernels.set_isa("")
        pytest.skip(f"{request.param} not supported on this CPU")
    yield request.param
    kernels.set_isa("")


def _all_classes(rng: np.random.Generator, n: int = 4099) -> np.ndarray:
    """Random bit patterns (every exponent, subnormals, inf, NaN) plus the special values; odd length so the
    vector loops have a tail."""
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).copy()
    x[: SPECIAL_F32.size] = SPECIAL_F32
    extra = np.array(
        [np.finfo(np.float32).max, -np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-40, -1e-40, 2.0**-149],
        np.float32,
    )
    x[SPECIAL_F32.size : SPECIAL_F32.size + extra.size] = extra
    return x


# Exponents around the edges of the shortcut: 2^-126 and 2^126 take it, 2^-127 (subnormal s) and 2^127
# (subnormal 1/s) must not; their results must be right either way.
BITWIDTH_ZEROPT = [(np.float32(8), np.float32(0)), (np.float32(32), np.float32(3)), (np.int32(24), np.float32(-5))]
SIGNED_NARROW_BITWIDTH = [(False, True, np.float32(4)), (True, True, np.float32(2)), (True, False, np.float32(1))]
EXPONENTS = [-149, -130, -127, -126, -125, -64, -8, -1, 0, 1, 7, 64, 125, 126, 127]


@pytest.mark.parametrize("mode", MODES)
def test_pow2_scales_every_exponent(isa, mode, rng):
    x = _all_classes(rng)
    for e in EXPONENTS:
        p = np.float32(2.0**e)
        # The power of two, and its neighbours (one mantissa bit off), which must keep true division.
        for s in (p, -p, np.nextafter(p, np.float32(np.inf)), -np.nextafter(p, np.float32(0))):
            for bw, z in [
                (np.float32(8), np.float32(0)),
                (np.float32(32), np.float32(3)),
                (np.int32(24), np.float32(-5)),
            ]:
                with np.errstate(all="ignore"):
                    want = ref.quant(x, s, z, bw, True, False, mode)
                assert_bitexact(kernels.quant(x, s, z, bw, True, False, mode), want)


def test_pow2_scales_unsigned_narrow_and_bipolar(isa, rng):
    x = _all_classes(rng)
    for e in (-126, -3, 0, 5, 126):
        s = np.float32(2.0**e)
        with np.errstate(all="ignore"):
            for signed, narrow, bw in [
                (False, True, np.float32(4)),
                (True, True, np.float32(2)),
                (True, False, np.float32(1)),
            ]:
                want = ref.quant(x, s, np.float32(0), bw, signed, narrow, "ROUND")
                assert_bitexact(kernels.quant(x, s, np.float32(0), bw, signed, narrow, "ROUND"), want)


def test_per_channel_mix_of_pow2_and_other_scales(isa, rng):
    """Per-channel scales: each channel's row has one scale, so each row picks its own form."""
    x = (rng.standard_normal((3, 6, 5, 7)) * 50).astype(np.float32)
    x.reshape(-1)[: SPECIAL_F32.size] = SPECIAL_F32
    s = np.array([0.25, 0.3, 2.0**-126, 0.1, 2.0**127, -0.5], np.float32).reshape(1, 6, 1, 1)
    z = np.array([0, 1, -2, 0, 3, 0], np.float32).reshape(1, 6, 1, 1)
    big = _all_classes(rng, x.size).reshape(x.shape)  # large values: a division error would not round away
    for mode in MODES:
        for xs, bw in [(x, np.float32(8)), (big, np.float32(32))]:
            with np.errstate(all="ignore"):
                want = ref.quant(xs, s, z, bw, True, False, mode)
            assert_bitexact(kernels.quant(xs, s, z, bw, True, False, mode), want)


@pytest.mark.parametrize("threads", [1, 2])
def test_pow2_scale_through_onnxruntime(threads, rng):
    x = _all_classes(rng, 200_003)
    for s in (np.float32(2.0**-4), np.float32(2.0**-127)):
        (y,) = run_node(
            "Quant",
            "qonnx.custom_op.general",
            [x, s, np.float32(0), np.float32(8)],
            const=[False, True, True, True],
            threads=threads,
        )
        with np.errstate(all="ignore"):
            assert_bitexact(y, ref.quant(x, s, np.float32(0), np.float32(8)))
