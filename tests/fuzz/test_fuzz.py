"""The fuzz corpus of issue 9: a fixed-seed set of mutated models of every op family, each run in a forked child
with a memory cap and a timeout. Fails on any signal, hang, sanitizer report, non-text error or error that does
not name the node (fuzz_harness.BAD). ORTQUANT_FUZZ_CASES overrides the corpus size (default 2000);
`make fuzz N=...` runs longer campaigns."""

from __future__ import annotations

import json
import os

import fuzz_harness as fh
import fuzz_seeds

N_CASES = int(os.environ.get("ORTQUANT_FUZZ_CASES", "2000"))
CORPUS_SEED = 20261123
TIMEOUT = 60.0 if fh.UNDER_ASAN else 10.0
# Seeds that must fail cleanly as they are (unsupported by design).
EXPECTED_ERRORS = {"q_genericpartition", "l_layernorm"}


def _report(outcomes: list[fh.Outcome]) -> str:
    rep = fh.summarize(outcomes)
    return json.dumps({"classes": rep["classes"], "bad": rep["bad"][:10]}, indent=1, default=str)[:8000]


def test_seeds_run_cleanly():
    """Every seed runs (or, for the unsupported ops, fails with its clean message): what a mutation breaks is the
    mutation's doing, and every family is really exercised."""
    outcomes = fh.run_campaign(0, mutations=False, timeout=TIMEOUT)
    assert len(outcomes) == len(fuzz_seeds.load_seeds())
    for o in outcomes:
        want = "error" if o.seed in EXPECTED_ERRORS else "ok"
        assert o.cls == want, (o.seed, o.cls, o.detail)
    families = {o.seed.split("_")[0] for o in outcomes}
    assert {"q", "ng", "l", "linger", "qonnx"} <= families


def test_fixed_seed_corpus_has_no_bad_outcome():
    outcomes = fh.run_campaign(N_CASES, seed=CORPUS_SEED, jobs=2, timeout=TIMEOUT)
    assert len(outcomes) == N_CASES
    bad = [o for o in outcomes if o.cls in fh.BAD]
    assert not bad, _report(outcomes)
    # The corpus reaches the kernels: plenty of cases run to completion and plenty fail with a named error.
    counts = {c: sum(o.cls == c for o in outcomes) for c in ("ok", "error")}
    assert counts["ok"] > N_CASES // 20 and counts["error"] > N_CASES // 20, counts
