"""linger SoftmaxInt / LogSoftmaxInt (linger-extra.md sections 1, 2): the SOFTMAX and LOGN kernels on the spec's
examples and on random rows, and the ops end to end against the numpy reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from linger_util import DOMAINS, int8_data, int16_data, run_linger

from conftest import assert_bitexact
from ortquant import _C
from ortquant.reference import linger as ref

T = onnx.TensorProto


@pytest.mark.parametrize(
    "row,want",
    [
        ([0, 0], [16384, 16384]),
        ([0, 2**25], [8812, 23955]),
        ([5], [32768]),
        ([0, -(2**31), -(2**31)], [32768, 0, 0]),
    ],
)
def test_softmax_kernel_spec_examples(row, want):
    x = np.array(row, np.int32)
    assert ref.softmax_q25_row(x).tolist() == want
    assert _C.linger_softmax_q25_row(x).tolist() == want


def test_logn_spec_examples():
    v = np.array([32768, 16384, 1, 2**31 - 1, 0, -5], np.int32)
    want = [254, -23257906, -348872145, 372130623, -(2**31), -(2**31)]
    assert ref.logn_q15(v).tolist() == want
    assert _C.linger_logn(v).tolist() == want


def test_logn_against_reference(rng):
    v = np.concatenate([np.arange(-3, 70000), rng.integers(1, 2**31 - 1, 20000), 2 ** np.arange(31) - 1])
    v = v.astype(np.int32)
    assert_bitexact(_C.linger_logn(v).astype(np.int64), ref.logn_q15(v))


def test_softmax_kernel_random_rows(rng):
    for n in [1, 2, 3, 7, 64, 255, 256, 257, 1000]:
        for spread in [2**20, 2**25, 2**28, 2**32]:
            x = rng.integers(-spread // 2, spread // 2, n).astype(np.int64)
            x = np.clip(x, -(2**31), 2**31 - 1).astype(np.int32)
            assert_bitexact(_C.linger_softmax_q25_row(x).astype(np.int64), ref.softmax_q25_row(x))
    flat = np.zeros(300, np.int32)  # >= 256 equal maxima: the int32 sum saturates
    assert_bitexact(_C.linger_softmax_q25_row(flat).astype(np.int64), ref.softmax_q25_row(flat))


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("sx", [32.0, 64.0, 2.0**-2, 1.0, 2.0**10, 0.75])
def test_op_kernel(rng, log, sx):
    for shape, dim in [((2, 3, 6), -1), ((2, 5, 3), 1), ((4, 7), 0), ((9,), 0), ((3, 1, 4), 1)]:
        x = int8_data(rng, shape)
        for so, ob in [(256.0, 8), (32.0, 8), (128.0, 16), (2.0**20, 32), (None, None)]:
            got = _C.linger_softmax(x, sx, dim, so, ob, log)
            assert_bitexact(got, ref.softmax_int(x, sx, dim, so, ob, log))


def test_int16_input(rng):
    x = int16_data(rng, (3, 11))
    for log in (False, True):
        assert_bitexact(_C.linger_softmax(x, 4096.0, -1, 64.0, 8, log), ref.softmax_int(x, 4096.0, -1, 64.0, 8, log))


def test_logsoftmax_input_overflow_is_int32_min():
    # scale_x = 1: 127 * 2^25 does not fit int32 -> x86 int() gives INT32_MIN (linger-extra.md section 2).
    x = np.array([[127, 64, -64, 0, 3]], np.int8)
    assert_bitexact(_C.linger_softmax(x, 1.0, -1, 32.0, 8, True), ref.softmax_int(x, 1.0, -1, 32.0, 8, True))
    assert_bitexact(_C.linger_softmax(x, 1.0, -1, 256.0, 8, False), ref.softmax_int(x, 1.0, -1, 256.0, 8, False))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("op", ["SoftmaxInt", "LogSoftmaxInt"])
def test_through_ort(domain, op, rng):
    log = op == "LogSoftmaxInt"
    x = int8_data(rng, (3, 4, 9))
    for dim in (-1, 1, 0):
        for ob, so, otype in [(8, 256.0, T.INT8), (16, 64.0, T.INT16), (None, None, T.FLOAT)]:
            attrs = {"scale_x": 32.0, "data_bits": 8, "dim": dim, "platform_quant": "luna_quant"}
            if ob is not None:
                attrs |= {"o_bits": ob, "scale_o": so}
            got = run_linger(op, [x], attrs, domain=domain, out_dtype=otype, threads=2)
            assert_bitexact(got, ref.softmax_int(x, 32.0, dim, so, ob, log))
