"""LSTMInt / LSTMInt_Is8_Is64 / LSTMInt_Is8_Is64_If32_If32 (linger.md section 4, decisions 11-13, 15, 16)."""

from __future__ import annotations

import numpy as np
import pytest
import rnn_util as u

from conftest import assert_bitexact
from ortquant.reference import linger_rnn as ref


def test_table_spot_values() -> None:
    # Values stated in linger.md next to the segment definitions.
    assert [ref.sigmoid_segment(v) for v in (0, 2048, -2048, 32767, -32768)] == [64, 94, 34, 127, 0]
    sig, tanh = ref.sigmoid_table(), ref.tanh_table()
    assert sig.shape == tanh.shape == (65536,)
    assert tanh[32768] == 0 and tanh[0] == -128 and tanh[65535] == 127  # floor makes it asymmetric
    # Monotone non-decreasing, as piecewise-linear approximations of monotone functions must be.
    assert (np.diff(sig) >= 0).all() and (np.diff(tanh) >= 0).all()


@pytest.mark.parametrize("case", u.LSTM_CASES)
def test_reference_matches_linger(case: str) -> None:
    """The numpy reference alone reproduces linger's outputs, hidden and cell (validates the reading of the spec)."""
    model, feeds, expected = u.load_case(case)
    got = u.reference_graph(model, feeds)
    for g, e in zip(got, expected, strict=True):
        assert_bitexact(g, e)
