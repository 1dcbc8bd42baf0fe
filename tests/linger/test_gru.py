"""GRUInt / GRUInt_Is8_Is64 / GRUInt_Is8_Is64_If32 (linger.md section 4, decisions 11-13, 16)."""

from __future__ import annotations

import pytest
import rnn_util as u

from conftest import assert_bitexact


@pytest.mark.parametrize("case", u.GRU_CASES)
def test_reference_matches_linger(case: str) -> None:
    """The numpy reference alone reproduces linger's outputs and hidden (validates the reading of the spec)."""
    model, feeds, expected = u.load_case(case)
    got = u.reference_graph(model, feeds)
    for g, e in zip(got, expected, strict=True):
        assert_bitexact(g, e)
