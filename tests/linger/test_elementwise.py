"""linger Quant / Dequant / Requant / iqAdd / iqMul / iqDiv / iqCat / iqClamp / Relu: the C++ (through
ortquant._C on every ISA path and through onnxruntime in both domains) against the numpy reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from linger_util import DOMAINS, ISAS, int8_data, int16_data, run_linger

from conftest import SPECIAL_F32, assert_bitexact
from ortquant import _C, kernels
from ortquant.reference import linger as ref

T = onnx.TensorProto


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def float_data(rng: np.random.Generator, n: int = 5000) -> np.ndarray:
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[: SPECIAL_F32.size] = SPECIAL_F32
    # exact ties at scale 64: k/64 + 1/128 -> (2k+1)/2 after scaling, both signs
    k = np.arange(-300, 300, dtype=np.float32)[: max(0, n - SPECIAL_F32.size)]
    x[SPECIAL_F32.size : SPECIAL_F32.size + k.size] = k / 64 + np.float32(1 / 128)
    return x


# ---- Quant / Dequant / Requant ------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [8, 4, 16, 12, 32])
@pytest.mark.parametrize("scale", [64.0, 1.0, 2.0**-3, 2.0**15, 0.3, 100.0])
def test_quant_kernel(isa, rng, bits, scale):
    x = float_data(rng)
    with np.errstate(over="ignore", invalid="ignore"):
        assert_bitexact(_C.linger_quant(x, scale, bits), ref.quant(x, scale, bits))


def test_quant_float32_half_step():
    # 0.49999997 * 1 + 0.5 rounds to 1.0 in float32: linger's float32 Quant gives 1, not 0.
    x = np.array([0.49999997, -0.50000006, 0.5, -0.5, 2.5, -2.5, np.nan, np.inf, -np.inf], np.float32)
    want = np.array([1, -1, 1, 0, 3, -2, 0, 127, -128], np.int8)
    assert_bitexact(ref.quant(x, 1.0, 8), want)
    assert_bitexact(_C.linger_quant(x, 1.0, 8), want)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("scale", [64.0, 1.0, 2.0**-3, 2.0**30, 0.3, 3.0])
def test_dequant_kernel(isa, rng, dtype, scale):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 5000, dtype=np.int64).astype(dtype)
    x[:2] = [info.min, info.max]
    assert_bitexact(_C.linger_dequant(x, scale), ref.dequant(x, scale))


REQUANT_CASES = [
    (np.int8, 8, 16, 32.0, 8192.0),  # 8 -> 16 (x << 8), what linger writes before iqSigmoid/iqTanh
    (np.int16, 16, 8, 8192.0, 32.0),  # 16 -> 8 (RHU >> 8, saturating)
    (np.int16, 16, 16, 4096.0, 4096.0),  # identity
    (np.int16, 16, 16, 4096.0, 1024.0),
    (np.int16, 16, 16, 1024.0, 4096.0),  # int16 left shift: saturating, int32 lanes
    (np.int8, 8, 16, 1.0, 2.0**9),  # 8 -> 16 beyond x << 8: int32 lanes
    (np.int8, 8, 32, 16.0, 16.0 * 2**24),
    (np.int32, 32, 8, 2.0**28, 16.0),
    (np.int32, 32, 16, 2.0**20, 2.0**10),
    (np.int8, 8, 4, 64.0, 4.0),  # 8 -> 4 bits in int8: saturate to [-8, 7]
    (np.int8, 4, 8, 4.0, 64.0),
    (np.int8, 8, 8, 64.0, 48.0),  # non-power-of-two ratio
    (np.int16, 16, 8, 1000.0, 3.0),
    (np.int8, 8, 8, 2.0**-20, 2.0**20),  # huge left shift: saturates
    (np.int8, 8, 8, 2.0**20, 2.0**-20),  # huge right shift: 0
]


@pytest.mark.parametrize("dtype,dbits,obits,sx,so", REQUANT_CASES)
def test_requant_kernel(isa, rng, dtype, dbits, obits, sx, so):
    x = int8_data(rng, (4000,)) if dtype == np.int8 else int16_data(rng, (4000,))
    if dtype == np.int32:
        x = rng.integers(-(2**31), 2**31, 4000, dtype=np.int64).astype(np.int32)
        x[:6] = [-(2**31), 2**31 - 1, 0, 2**27, -(2**27), 2**27 - 1]
    if dbits == 4:
        x = np.clip(x, -8, 7).astype(np.int8)
    assert_bitexact(_C.linger_requant(x, sx, so, obits), ref.requant(x, sx, so, obits))


def test_requant_spec_examples():
    # linger-extra.md section 7, 16 -> 8 with ratio 1/256.
    x = np.array([32767, 32640, -32768, -128, -129, 127, 128], np.int16)
    want = np.array([127, 127, -128, 0, -1, 0, 1], np.int8)
    assert_bitexact(ref.requant(x, 2**15, 2**7, 8), want)
    assert_bitexact(_C.linger_requant(x, 2**15, 2**7, 8), want)


@pytest.mark.parametrize("domain", DOMAINS)
def test_quant_dequant_requant_through_ort(domain, rng):
    x = float_data(rng, 3 * 5 * 7).reshape(3, 5, 7)
    for bits, out in [(8, T.INT8), (16, T.INT16), (4, T.INT8), (24, T.INT32)]:
        attrs = {"data_bits": bits, "scale_x": 32.0, "platform_quant": "luna_quant"}
        with np.errstate(over="ignore", invalid="ignore"):
            assert_bitexact(run_linger("Quant", [x], attrs, domain=domain, out_dtype=out), ref.quant(x, 32.0, bits))
    q8 = int8_data(rng, (4, 9))
    assert_bitexact(
        run_linger("Dequant", [q8], {"scale_o": 16.0}, domain=domain, out_dtype=T.FLOAT), ref.dequant(q8, 16.0)
    )
    f = float_data(rng, 36).reshape(4, 9)
    assert_bitexact(run_linger("Dequant", [f], {"scale_o": 1.0}, domain=domain, out_dtype=T.FLOAT), f)
    for dt, dbits, obits, sx, so in REQUANT_CASES[:7]:
        x = int8_data(rng, (6, 50)) if dt == np.int8 else int16_data(rng, (6, 50))
        if dt == np.int32:
            x = rng.integers(-(2**31), 2**31, (6, 50), dtype=np.int64).astype(np.int32)
        attrs = {"data_bits": dbits, "o_bits": obits, "scale_x": sx, "scale_o": so}
        out = {8: T.INT8, 16: T.INT16, 32: T.INT32}[obits]
        assert_bitexact(run_linger("Requant", [x], attrs, domain=domain, out_dtype=out), ref.requant(x, sx, so, obits))


def test_constant_quant_is_computed_once_and_exact(rng):
    x = float_data(rng, 64).reshape(8, 8)
    attrs = {"data_bits": 8, "scale_x": 16.0}
    with np.errstate(invalid="ignore"):
        assert_bitexact(run_linger("Quant", [x], attrs, const=True), ref.quant(x, 16.0, 8))


def test_threads_do_not_change_results(rng):
    x = float_data(rng, 1 << 18) * np.float32(40)
    attrs = {"data_bits": 8, "scale_x": 4.0}
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref.quant(x, 4.0, 8)
        for threads in (1, 2):
            assert_bitexact(run_linger("Quant", [x], attrs, threads=threads), want)


# ---- iqAdd / iqMul / iqDiv ----------------------------------------------------------------------------------

SCALES = [
    (128.0, 16.0, 16.0),  # conformance iqadd
    (64.0, 256.0, 128.0),  # conformance iqmul
    (32.0, 32.0, 64.0),  # so > sx: left shifts (linger never writes it for iqAdd, handled anyway)
    (2.0**-3, 2.0**10, 2.0**4),
    (2.0**12, 2.0**-2, 2.0**-9),  # big right shifts
    (96.0, 40.0, 17.0),  # non-power-of-two: the table path
    (1.0, 2.0**20, 2.0**-25),  # a shift outside the vector range
    (1.0, 2.0, 256.0),  # e = 8 / 7: the largest left shifts of the int16 lanes
    (1.0, 1.0, 512.0),  # e = 9: int32 lanes
]
SHAPES = [
    ((7, 33), (7, 33)),
    ((4, 1, 5), (3, 1)),
    ((2, 3, 17), (17,)),
    ((5,), ()),
    ((), (6, 2)),
    ((2, 3), (2, 1)),
    ((3, 100), ()),  # long rows against a broadcast scalar: the vector loops with one operand splatted
    ((), (2, 99)),
    ((5, 70), (5, 1)),
]


@pytest.mark.parametrize("op", ["add", "mul", "div"])
@pytest.mark.parametrize("sx,sy,so", SCALES)
def test_binary_int8_kernel(isa, rng, op, sx, sy, so):
    f = {"add": ref.iqadd, "mul": ref.iqmul, "div": ref.iqdiv}[op]
    for xs, ys in SHAPES:
        x, y = int8_data(rng, xs), int8_data(rng, ys)
        assert_bitexact(_C.linger_binary(op, x, y, sx, sy, so), f(x, y, sx, sy, so))


def test_binary_all_int8_pairs(isa):
    # Every (x, y) pair of int8 once, for the three ops at the conformance scales.
    x, y = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    x, y = x.astype(np.int8), y.astype(np.int8)
    for op, f, (sx, sy, so) in [
        ("add", ref.iqadd, (128.0, 16.0, 16.0)),
        ("mul", ref.iqmul, (64.0, 256.0, 128.0)),
        ("div", ref.iqdiv, (32.0, 128.0, 32.0)),
    ]:
        assert_bitexact(_C.linger_binary(op, x, y, sx, sy, so), f(x, y, sx, sy, so))


@pytest.mark.parametrize("sx,sy,so", [(32.0, 128.0, 32.0), (64.0, 64.0, 256.0), (2.0, 128.0, 4.0), (1.0, 1.0, 1.0)])
def test_iqdiv_float_path_equals_exact_rational(sx, sy, so):
    """linger-extra.md: for power-of-two scales the float32 path equals the exact rational with -128 for y == 0."""
    x, y = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    x, y = x.astype(np.int8), y.astype(np.int8)
    sel = (slice(None, None, 3), slice(None, None, 3))  # a third of the pairs each way keeps the Fraction loop short
    assert_bitexact(ref.iqdiv(x, y, sx, sy, so)[sel], ref.iqdiv_tensor_exact(x[sel], y[sel], sx, sy, so))
    assert (ref.iqdiv(x, y, sx, sy, so)[:, 128] == -128).all()  # y == 0, including 0/0


@pytest.mark.parametrize("op", ["add", "mul", "div"])
@pytest.mark.parametrize("c", [0.75, 3.0, 0.3, -7.5, 1e-3, -1e-6, 0.0, 100.0, 1e10, -0.7])
def test_binary_float_constant(isa, op, c):
    f = {"add": ref.iqadd, "mul": ref.iqmul, "div": ref.iqdiv}[op]
    x = np.arange(-128, 128, dtype=np.int8)
    y = np.array(c, np.float32)
    for sx, sy, so in [(128.0, 1.0, 128.0), (64.0, 1.0, 256.0), (16.0, 1.0, 2.0**-4), (64.0, 4.0, 32.0)]:
        want = f(x, y, sx, sy, so)
        assert_bitexact(_C.linger_binary(op, x, y, sx, sy, so, True), want)
        assert_bitexact(_C.linger_binary(op, x, y, sx, sy, so, False), want)


def test_iqdiv_division_by_zero_and_overflow_give_minus_128():
    x = np.array([-5, 0, 5, 127], np.int8)
    assert_bitexact(ref.iqdiv(x, np.float32(0.0), 64.0, 1.0, 256.0), np.full(4, -128, np.int8))
    got = _C.linger_binary("div", x, np.array(0.0, np.float32), 64.0, 1.0, 256.0, True)
    assert_bitexact(got, np.full(4, -128, np.int8))
    # x / 1e-6 at scale 256 (scale_x 1): |z * so| >= 2^31 -> INT32_MIN -> -128 even for positive x
    # (linger-extra.md); 5 / 1e-6 * 256 = 1.28e9 is still below 2^31 and saturates to 127.
    want = np.array([-128, 0, 127, -128], np.int8)
    assert_bitexact(ref.iqdiv(x, np.float32(1e-6), 1.0, 1.0, 256.0), want)
    assert_bitexact(_C.linger_binary("div", x, np.array(1e-6, np.float32), 1.0, 1.0, 256.0, True), want)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("op", ["iqAdd", "iqMul", "iqDiv"])
def test_binary_through_ort(domain, op, rng):
    f = {"iqAdd": ref.iqadd, "iqMul": ref.iqmul, "iqDiv": ref.iqdiv}[op]
    sx, sy, so = 64.0, 32.0, 32.0
    attrs = {"scale_x": sx, "scale_y": sy, "scale_o": so, "platform_quant": "luna_quant"}
    for xs, ys in [((3, 40), (3, 40)), ((2, 3, 4), (3, 1)), ((4, 5), (1,))]:
        x, y = int8_data(rng, xs), int8_data(rng, ys)
        for const in ([False, False], [False, True], [True, True]):
            got = run_linger(op, [x, y], attrs, domain=domain, const=const)
            assert_bitexact(got, f(x, y, sx, sy, so))
    # float32 constant and float32 runtime tensor second input (scale_y = 1 as linger writes it)
    x = int8_data(rng, (5, 7))
    for y in (np.array(0.75, np.float32), (rng.standard_normal((1, 7)) * 2).astype(np.float32)):
        attrs = {"scale_x": sx, "scale_y": 1.0, "scale_o": 128.0}
        for const in ([False, True], [False, False]):
            with np.errstate(divide="ignore", invalid="ignore"):
                assert_bitexact(run_linger(op, [x, y], attrs, const=const), f(x, y, sx, 1.0, 128.0))


def test_big_tensors_and_threads(rng):
    x, y = int8_data(rng, (3, 1 << 17)), int8_data(rng, (3, 1 << 17))
    attrs = {"scale_x": 128.0, "scale_y": 16.0, "scale_o": 16.0}
    want = ref.iqadd(x, y, 128.0, 16.0, 16.0)
    for threads in (1, 2):
        assert_bitexact(run_linger("iqAdd", [x, y], attrs, threads=threads), want)


# ---- iqCat / iqClamp / Relu ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scales,so",
    [
        ((64.0, 16.0), 16.0),
        ((256.0, 32.0, 16.0), 16.0),
        ((16.0, 64.0), 64.0),
        ((48.0, 16.0, 5.0), 12.0),
        ((2.0**20, 1.0), 2.0**-18),
    ],
)
def test_iqcat_kernel(isa, rng, scales, so):
    for dim in (0, 1, 2, -1, -3):
        shapes = []
        for k in range(len(scales)):
            s = [3, 4, 5]
            s[dim] = 2 + k
            shapes.append(tuple(s))
        xs = [int8_data(rng, s) for s in shapes]
        assert_bitexact(_C.linger_iqcat(xs, list(scales), so, dim), ref.iqcat(xs, scales, so, dim))


@pytest.mark.parametrize("domain", DOMAINS)
def test_iqcat_through_ort(domain, rng):
    xs = [int8_data(rng, (2, 3, 2)), int8_data(rng, (2, 3, 4)), int8_data(rng, (2, 3, 1))]
    attrs = {"scale_x_0": 256.0, "scale_x_1": 32.0, "scale_x_2": 16.0, "scale_o": 16.0, "dim": -1}
    assert_bitexact(run_linger("iqCat", xs, attrs, domain=domain), ref.iqcat(xs, (256.0, 32.0, 16.0), 16.0, -1))
    one = int8_data(rng, (4, 4))
    assert_bitexact(
        run_linger("iqCat", [one], {"scale_x_0": 8.0, "scale_o": 32.0, "dim": 0}, domain=domain),
        ref.iqcat([one], (8.0,), 32.0, 0),
    )
    big = [int8_data(rng, (2, 70000)), int8_data(rng, (2, 30000))]
    attrs = {"scale_x_0": 64.0, "scale_x_1": 16.0, "scale_o": 16.0, "dim": 1}
    assert_bitexact(run_linger("iqCat", big, attrs, threads=2), ref.iqcat(big, (64.0, 16.0), 16.0, 1))


@pytest.mark.parametrize(
    "sx,so,vmin,vmax",
    [
        (128.0, 128.0, 0.0, 127 / 128),
        (16.0, 16.0, -8.0, 7.9375),
        (64.0, 16.0, -8.0, 7.9375),
        (8.0, 32.0, 0.0, 127 / 32),
        (32.0, 32.0, -1.5, 2.25),
    ],
)
def test_iqclamp(isa, sx, so, vmin, vmax):
    x = np.arange(-128, 128, dtype=np.int8)
    want = ref.iqclamp(x, sx, so, vmin, vmax)
    assert_bitexact(_C.linger_iqclamp(x, sx, so, vmin, vmax), want)
    attrs = {"min": vmin, "max": vmax, "scale_x": sx, "scale_o": so}
    for domain in DOMAINS:
        assert_bitexact(run_linger("iqClamp", [x.reshape(16, 16)], attrs, domain=domain), want.reshape(16, 16))


@pytest.mark.parametrize("dtype,otype", [(np.int8, T.INT8), (np.int32, T.INT32), (np.float32, T.FLOAT)])
def test_relu(rng, dtype, otype):
    if dtype == np.float32:
        x = np.concatenate([SPECIAL_F32, rng.standard_normal(100).astype(np.float32)]).reshape(2, 61)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, (4, 30), dtype=np.int64).astype(dtype)
        x[0, :2] = [info.min, info.max]
    want = ref.relu(x)
    assert_bitexact(_C.linger_relu(x), want)
    for domain in DOMAINS:
        assert_bitexact(run_linger("Relu", [x], {}, domain=domain, out_dtype=otype), want)
