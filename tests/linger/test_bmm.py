"""BmmInt through onnxruntime + ortquant vs the numpy reference: batched shapes (one batch per task for small
matrices, the whole pool per batch for large ones), constant y, every output kind; validation errors."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import DOMAINS, int8_data, out_attrs, run_matrix

from conftest import ORT_ERRORS, assert_bitexact
from ortquant.reference import linger_matrix as ref


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("o_bits,scale_o", [(8, 128.0), (16, 2.0**12), (32, 1.0), (None, None)])
@pytest.mark.parametrize(
    "xs,ys",
    [
        ((2, 3, 4), (2, 4, 6)),
        ((1, 1, 1), (1, 1, 1)),
        ((3, 7, 37), (3, 37, 70)),
        ((5, 2), (2, 9)),
        ((2, 2, 3, 5), (2, 2, 5, 4)),
    ],
)
@pytest.mark.parametrize("const", [False, True])
def test_bmm_matches_reference(domain, o_bits, scale_o, xs, ys, const, rng):
    x = int8_data(rng, xs, extreme=0.2)
    y = int8_data(rng, ys, extreme=0.2)
    attrs = out_attrs(o_bits, scale_o, scale_x=128.0, scale_y=64.0)
    got = run_matrix("BmmInt", [x, y], attrs, const=[False, const], domain=domain)
    assert_bitexact(got, ref.bmm(x, y, 128.0, 64.0, scale_o, o_bits))


@pytest.mark.parametrize("threads", [1, 2])
def test_bmm_many_small_and_one_large(threads, rng):
    for xs, ys in [((16, 9, 33), (16, 33, 17)), ((1, 200, 300), (1, 300, 260))]:
        x = int8_data(rng, xs)
        y = int8_data(rng, ys)
        attrs = out_attrs(8, 1.0, scale_x=32.0, scale_y=32.0)
        got = run_matrix("BmmInt", [x, y], attrs, threads=threads)
        assert_bitexact(got, ref.bmm(x, y, 32.0, 32.0, 1.0, 8))


def _expect_error(inputs, attrs, const, *causes):
    with pytest.raises(ORT_ERRORS) as e:
        run_matrix("BmmInt", inputs, attrs, const=const)
    msg = str(e.value)
    assert "bmmint_node" in msg, msg
    for cause in causes:
        assert cause in msg, msg


def test_bmm_errors(rng):
    a = out_attrs(8, 1.0, scale_x=1.0, scale_y=1.0)
    _expect_error([int8_data(rng, (2, 3, 4)), int8_data(rng, (2, 5, 6))], a, [False, False], "inner dims differ")
    _expect_error([int8_data(rng, (2, 3, 4)), int8_data(rng, (3, 4, 6))], a, [False, False], "batch dims differ")
    _expect_error([int8_data(rng, (2, 3, 4)), int8_data(rng, (4, 6))], a, [False, False], "same rank")
    _expect_error([int8_data(rng, (2, 3, 4)), np.zeros((2, 4, 6), np.uint8)], a, [False, True], "y must be int8")
    _expect_error([int8_data(rng, (2, 3, 4)), int8_data(rng, (2, 4, 6))], {"scale_x": 1.0}, [False, False], "scale_y")
