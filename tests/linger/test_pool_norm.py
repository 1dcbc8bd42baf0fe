"""linger AvgPool2dInt, BatchNorm2dInt / BatchNorm1dInt (1.1.1 and the seed's layout), iqSum, iqPad: C++ against
the numpy reference, directly and through onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from linger_util import DOMAINS, int8_data, run_linger

from conftest import assert_bitexact
from ortquant import _C
from ortquant.reference import linger as ref

T = onnx.TensorProto

POOLS = [
    # kernel, strides, pads (t, l, b, r), ceil_mode, input HxW
    ((2, 2), (2, 2), (0, 0, 0, 0), False, (6, 6)),  # area 4 (a shift in thinker)
    ((3, 3), (1, 1), (1, 1, 1, 1), False, (5, 5)),  # area 9, padding counted
    ((3, 2), (2, 2), (0, 0, 0, 0), True, (7, 5)),  # ceil_mode overhang: divided by the clipped window
    ((4, 4), (4, 4), (0, 0, 0, 0), False, (8, 8)),
    ((3, 3), (2, 2), (1, 1, 1, 1), True, (8, 9)),
    ((5, 3), (3, 2), (2, 1, 2, 1), True, (11, 10)),
    ((1, 1), (1, 1), (0, 0, 0, 0), False, (3, 4)),
    ((2, 3), (1, 3), (1, 0, 0, 1), False, (6, 7)),  # asymmetric pads
]


@pytest.mark.parametrize("k,s,p,ceil,hw", POOLS)
def test_avgpool(rng, k, s, p, ceil, hw):
    x = int8_data(rng, (2, 3, *hw))
    want = ref.avgpool2d(x, k, s, p, ceil)
    assert_bitexact(_C.linger_avgpool(x, list(k), list(s), list(p), ceil), want)
    for v in (np.full_like(x, 127), np.full_like(x, -128)):  # saturation, exact .5 ties of the means
        assert_bitexact(_C.linger_avgpool(v, list(k), list(s), list(p), ceil), ref.avgpool2d(v, k, s, p, ceil))
    if p[0] == p[2] and p[1] == p[3]:
        attrs = {
            "kernel_shape": list(k),
            "strides": list(s),
            "pads": list(p),
            "ceil_mode": int(ceil),
            "data_bits": 8,
            "o_bits": 8,
            "scale_x": 32.0,
            "scale_o": 32.0,
            "platform_quant": "luna_quant",
        }
        for domain in DOMAINS:
            assert_bitexact(run_linger("AvgPool2dInt", [x], attrs, domain=domain), want)


def test_avgpool_4bit_saturation():
    x = np.full((1, 1, 4, 4), 100, np.int8)
    assert_bitexact(_C.linger_avgpool(x, [2, 2], [2, 2], [0, 0, 0, 0], False, 4), np.full((1, 1, 2, 2), 7, np.int8))


@pytest.mark.parametrize(
    "shape,op",
    [
        ((2, 5, 4, 3), "BatchNorm2dInt"),
        ((3, 5), "BatchNorm1dInt"),
        ((2, 5, 7), "BatchNorm1dInt"),
        ((2, 5, 1, 1), "BatchNorm2dInt"),
    ],
)
@pytest.mark.parametrize(
    "sx,sw,so,obits",
    [
        (32.0, 64.0, 64.0, 8),
        (16.0, 128.0, 4.0, 8),
        (64.0, 64.0, 2.0**12, 16),
        (8.0, 32.0, 2.0**20, 32),
        (30.0, 50.0, 7.0, 8),
    ],
)
def test_batchnorm(rng, shape, op, sx, sw, so, obits):
    x = int8_data(rng, shape)
    c = shape[1]
    w = rng.integers(-128, 128, c).astype(np.int8)
    b = rng.integers(-40000, 40000, c).astype(np.int32)
    want = ref.batchnorm_int(x, w, b, sx, sw, so, obits)
    assert_bitexact(_C.linger_batchnorm(x, w.tolist(), b.tolist(), [sx, sw, so], obits), want)
    mean = np.zeros(c, np.float32)
    var = np.ones(c, np.float32)
    attrs = {
        "data_bits": 8,
        "parameter_bits": 8,
        "o_bits": obits,
        "scale_x": sx,
        "scale_w": sw,
        "scale_o": so,
        "platform_quant": "luna_quant",
    }
    otype = {8: T.INT8, 16: T.INT16, 32: T.INT32}[obits]
    for domain in DOMAINS:
        for const in ([False, True, True, True, True], [False, False, False, False, False]):
            got = run_linger(op, [x, w, b, mean, var], attrs, domain=domain, const=const, out_dtype=otype)
            assert_bitexact(got, want)
    # mean/var absent (they are unused)
    assert_bitexact(run_linger(op, [x, w, b], attrs, const=[False, True, True], out_dtype=otype), want)


def test_batchnorm_seed_layout(rng):
    """Decision 15: mul_w/add_b with scale_mul_* / scale_add_*."""
    x = int8_data(rng, (2, 4, 3, 3))
    mul_w = rng.integers(-128, 128, 4).astype(np.int8)
    add_b = rng.integers(-128, 128, 4).astype(np.int8)
    smx, smw, smo, sab, sao = 32.0, 64.0, 16.0, 8.0, 16.0
    want = ref.batchnorm_int_old(x, mul_w, add_b, smx, smw, smo, sab, sao, 8)
    got = _C.linger_batchnorm(x, mul_w.tolist(), add_b.tolist(), [smx, smw, smo, sab, sao], 8)
    assert_bitexact(got, want)
    attrs = {
        "scale_mul_x": smx,
        "scale_mul_w": smw,
        "scale_mul_o": smo,
        "scale_add_b": sab,
        "scale_add_o": sao,
        "o_bits": 8,
        "data_bits": 8,
    }
    assert_bitexact(run_linger("BatchNorm2dInt", [x, mul_w, add_b], attrs, const=[False, True, True]), want)


@pytest.mark.parametrize("dims,keep", [([1], False), ([0, 2], False), ([-1], True), ([], False), ([0, 1, 2], True)])
@pytest.mark.parametrize("sx,so", [(64.0, 64.0), (64.0, 8.0), (16.0, 128.0), (10.0, 3.0)])
def test_iqsum(rng, dims, keep, sx, so):
    x = int8_data(rng, (2, 5, 3))
    want = ref.iqsum(x, sx, so, dims, keep)
    assert_bitexact(_C.linger_iqsum(x, sx, so, dims, keep), want)
    attrs = {"scale_x": sx, "scale_o": so, "platform_quant": "luna_quant"}
    if len(dims) == 1:
        attrs["dims"] = dims[0]  # an INT, as linger writes x.sum(1)
    elif dims:
        attrs["dims"] = dims  # INTS for x.sum((0, 2))
    if keep:
        attrs["keepdims"] = 1
    for domain in DOMAINS:
        assert_bitexact(run_linger("iqSum", [x], attrs, domain=domain), want)


def test_iqsum_large_reduction(rng):
    x = int8_data(rng, (3, 20000))
    assert_bitexact(_C.linger_iqsum(x, 64.0, 2.0**-6, [1], False), ref.iqsum(x, 64.0, 2.0**-6, [1]))


@pytest.mark.parametrize(
    "pads", [[0, 0, 0, 1, 0, 0, 1, 2], [1, 0, 2, 0, 0, 3, 0, 1], [0, -1, 1, 0, 0, 0, -2, 2], [0, 0, 0, 0, 0, 0, 0, 0]]
)
def test_iqpad(rng, pads):
    x = int8_data(rng, (1, 2, 3, 4))
    for value in (0, -7):
        want = ref.iqpad(x, pads, value)
        assert_bitexact(_C.linger_iqpad(x, pads, value), want)
        for domain in DOMAINS:
            got = run_linger(
                "iqPad",
                [x, np.array(pads, np.int64), np.array(value, np.int8)],
                {"mode": "constant"},
                domain=domain,
                const=[False, False, True],
            )
            assert_bitexact(got, want)
    assert_bitexact(run_linger("iqPad", [x, np.array(pads, np.int64)], {}), ref.iqpad(x, pads, 0))
