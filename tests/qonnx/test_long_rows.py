"""Element-wise kernels on rows longer than one block, on every ISA path and every rounding mode, vs the numpy
references. The kernels compile one fused loop per mode only for the modes models use (ROUND; FLOOR for Quant and
Trunc) and run every other mode through a staged loop that works block by block (256 elements) with a rounding
pass per block; the float16 and float64 paths take the mode at run time. Rows of 1000 elements (three full blocks
and a partial one) with parameters per tensor, per row and per element check that every block of a staged loop
reads the parameters of its own elements."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SPECIAL_F32, assert_bitexact
from ortquant import kernels
from ortquant.reference import ngraph as ngraph_ref
from ortquant.reference import qonnx as quant_ref
from ortquant.reference import qonnx_elementwise as ref
from ortquant.reference.qonnx import ROUNDING_MODES

ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]
SHAPE = (2, 1000)
F32 = np.float32


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _x(rng: np.random.Generator, dtype=np.float32) -> np.ndarray:
    x = (rng.standard_normal(SHAPE) * 40).astype(np.float32)
    flat = x.reshape(-1)
    flat[700 : 700 + SPECIAL_F32.size] = SPECIAL_F32  # special values inside a later block
    flat[300:310] = np.arange(10, dtype=np.float32) * 0.5 + 0.25  # ties at scale 0.5
    with np.errstate(over="ignore"):  # the large special values become +-inf in float16
        return x.astype(dtype)


def _scales(rng: np.random.Generator, dtype=np.float32) -> list[np.ndarray]:
    return [
        np.asarray(0.5, dtype),  # per tensor, a power of two (the reciprocal form of the Quant loop)
        np.asarray(0.37, dtype),  # per tensor
        rng.uniform(0.1, 2, (2, 1)).astype(dtype),  # per row
        rng.uniform(0.1, 2, SHAPE).astype(dtype),  # per element
    ]


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_quant(isa, mode, rng):
    x = _x(rng)
    for s in _scales(rng):
        for z in (F32(0), rng.integers(-3, 3, SHAPE).astype(F32)):
            got = kernels.quant(x, s, z, F32(5), True, False, mode)
            assert_bitexact(got, quant_ref.quant(x, s, z, F32(5), True, False, mode))


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_quant_float16(isa, mode, rng):
    x = _x(rng, np.float16)
    for s in _scales(rng, np.float16):
        z = rng.integers(-3, 3, SHAPE).astype(np.float16)
        got = kernels.quant(x, s, z, np.float16(5), True, False, mode)
        assert_bitexact(got, quant_ref.quant(x, s, z, np.float16(5), True, False, mode))


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_trunc(isa, mode, rng):
    x = _x(rng)
    for s in _scales(rng):
        z = rng.integers(-3, 3, SHAPE).astype(F32)
        for ib, ob in ((F32(8), F32(5)), (np.int32(8), np.int32(5))):  # float32 and float64 right shift
            got = kernels.trunc(x, s, z, ib, ob, rounding_mode=mode)
            assert_bitexact(got, ref.trunc_v1(x, s, z, ib, ob, mode))
        os_ = (s * F32(8)).astype(F32)
        got = kernels.trunc(x, s, z, F32(8), F32(4), out_scale=os_, rounding_mode=mode)
        assert_bitexact(got, ref.trunc_v2(x, s, z, F32(8), os_, F32(4), True, False, mode))


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_trunc_float16(isa, mode, rng):
    x = _x(rng, np.float16)
    h = np.float16
    for s in _scales(rng, h):
        z = rng.integers(-3, 3, SHAPE).astype(h)
        got = kernels.trunc(x, s, z, h(8), h(5), rounding_mode=mode)
        assert_bitexact(got, ref.trunc_v1(x, s, z, h(8), h(5), mode))


@pytest.mark.parametrize("mode", ROUNDING_MODES)
@pytest.mark.parametrize(
    "has_inf,has_nan,saturation", [(False, False, True), (True, False, False), (False, True, False)]
)
def test_float_quant(isa, mode, has_inf, has_nan, saturation, rng):
    x = _x(rng)
    for s in _scales(rng):
        for mv in (F32(448), rng.uniform(1, 448, SHAPE).astype(F32)):
            args = (s, F32(4), F32(3), F32(7), mv)
            got = kernels.float_quant(x, *args, mode, has_inf, has_nan, saturation)
            assert_bitexact(got, ref.float_quant(x, *args, mode, has_inf, has_nan, saturation))


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_float_quant_float16(isa, mode, rng):
    h = np.float16
    x = _x(rng, h)
    for s in _scales(rng, h):
        args = (s, h(4), h(3), h(7), h(448))
        got = kernels.float_quant(x, *args, mode)
        assert_bitexact(got, ref.float_quant(x, *args, mode))
        xs = x.astype(F32)  # float32 X with float32 parameters of a float16 X: the float32 loop block by block
        args32 = (s.astype(F32), F32(4), F32(3), F32(7), F32(448))
        assert_bitexact(kernels.float_quant(x, *args32, mode), ref.float_quant(x, *args32, mode))
        assert_bitexact(kernels.float_quant(xs, *args32, mode), ref.float_quant(xs, *args32, mode))


@pytest.mark.parametrize("mode", sorted(ngraph_ref.ROUND_MODES))
@pytest.mark.parametrize("qtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
def test_ngraph_quantize(isa, mode, qtype, rng):
    x = (_x(rng) * F32(4)).astype(F32)
    cases = [
        (F32(0.37), np.asarray(3, qtype), ()),
        (rng.uniform(0.01, 3, (2,)).astype(F32), np.asarray([1, 5], qtype), (0,)),
        (rng.uniform(0.01, 3, SHAPE).astype(F32), rng.integers(0, 7, SHAPE).astype(qtype), (0, 1)),
    ]
    for s, z, axes in cases:
        got = kernels.ngraph_quantize(x, s, z, axes, mode)
        assert_bitexact(got, ngraph_ref.quantize(x, np.asarray(s), z, axes, mode))
