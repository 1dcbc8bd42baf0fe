"""The fuzz corpus of issue 9: a fixed-seed set of mutated models of every op family, each run in a forked child
with a memory cap and a timeout. Fails on any signal, hang, sanitizer report, non-text error or error that does
not name the node (fuzz_harness.BAD). ORTQUANT_FUZZ_CASES overrides the corpus size (default 2000);
`make fuzz N=...` runs longer campaigns.

Each campaign runs in a fresh interpreter (the harness CLI), never in the pytest process: forking a process that
already ran onnxruntime sessions copies a large heap (slow under ASan) and can inherit a lock held by one of its
worker threads, which left a child hanging once under ASan (a false "hang"). The harness process itself only
imports onnxruntime and never creates a session (fuzz_seeds prepares the seeds in a spawned interpreter), so its
children start single-threaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fuzz_harness as fh
import fuzz_seeds

N_CASES = int(os.environ.get("ORTQUANT_FUZZ_CASES", "2000"))
CORPUS_SEED = 20261123
TIMEOUT = 60.0 if fh.UNDER_ASAN else 10.0
# Seeds that must fail cleanly as they are (unsupported by design).
EXPECTED_ERRORS = {"q_genericpartition", "l_layernorm"}


def _campaign(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "report.json"
    cmd = [sys.executable, str(Path(fh.__file__)), "--quiet", "--outcomes", "--timeout", str(TIMEOUT)]
    cmd += ["--out", str(out)]
    r = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=3000)
    assert out.exists(), f"harness failed (exit {r.returncode}): {r.stderr[-4000:]}"
    rep = json.loads(out.read_text())
    assert r.returncode == (1 if rep["bad"] else 0), r.stderr[-4000:]
    return rep


def _report(rep: dict) -> str:
    return json.dumps({"classes": rep["classes"], "bad": rep["bad"][:10]}, indent=1, default=str)[:8000]


def test_seeds_run_cleanly(tmp_path):
    """Every seed runs (or, for the unsupported ops, fails with its clean message): what a mutation breaks is the
    mutation's doing, and every family is really exercised."""
    outcomes = _campaign(tmp_path, "--seeds-only")["outcomes"]
    assert len(outcomes) == len(fuzz_seeds.load_seeds())
    for o in outcomes:
        want = "error" if o["seed"] in EXPECTED_ERRORS else "ok"
        assert o["class"] == want, (o["seed"], o["class"], o["detail"])
    families = {o["seed"].split("_")[0] for o in outcomes}
    assert {"q", "ng", "l", "linger", "qonnx", "integer"} <= families


def test_fixed_seed_corpus_has_no_bad_outcome(tmp_path):
    rep = _campaign(tmp_path, "--cases", str(N_CASES), "--seed", str(CORPUS_SEED), "--jobs", "2")
    outcomes = rep["outcomes"]
    assert len(outcomes) == N_CASES
    assert not rep["bad"], _report(rep)
    # The corpus reaches the kernels: plenty of cases run to completion and plenty fail with a named error.
    counts = {c: sum(o["class"] == c for o in outcomes) for c in ("ok", "error")}
    assert counts["ok"] > N_CASES // 20 and counts["error"] > N_CASES // 20, counts
