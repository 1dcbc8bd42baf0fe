"""The Python-layer fuzz corpus: a fixed-seed set of mutated real-world models (fuzz_python.py) through
``prepare_model`` and onnxruntime in default and ``integer=True`` mode, each case in a forked child. Fails on any
exception other than ModelError / onnxruntime's own errors escaping from ortquant, on integer mode running what the
default mode refuses (or giving other output shapes), and on the harness's signal/hang classes.
ORTQUANT_FUZZ_PY_CASES overrides the corpus size (default 200); longer campaigns:
``python tests/fuzz/fuzz_python.py --cases N --seed S``.

As in test_fuzz.py, each campaign runs in a fresh interpreter (the CLI), never in the pytest process, whose
onnxruntime threads a forked child could inherit a held lock from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fuzz_python as fp

N_CASES = int(os.environ.get("ORTQUANT_FUZZ_PY_CASES", "200"))
CORPUS_SEED = 20261125


def _campaign(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "report.json"
    cmd = [sys.executable, str(Path(fp.__file__)), "--quiet", "--outcomes", "--out", str(out), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert out.exists(), f"fuzz_python failed (exit {r.returncode}): {r.stderr[-4000:]}"
    rep = json.loads(out.read_text())
    assert r.returncode == (1 if rep["bad"] else 0), r.stderr[-4000:]
    return rep


def test_seeds_run_in_both_modes(tmp_path):
    """Every unmutated seed runs in both modes with outputs of the same names, types and shapes: what a mutation
    breaks is the mutation's doing."""
    outcomes = _campaign(tmp_path, "--seeds-only")["outcomes"]
    assert len(outcomes) == len(fp.load_seeds()) >= 12
    bad = [(o["seed"], o["class"], o["detail"]) for o in outcomes if o["class"] != "ok"]
    assert not bad, bad


def test_fixed_seed_corpus_has_no_escape_and_no_disagreement(tmp_path):
    rep = _campaign(tmp_path, "--cases", str(N_CASES), "--seed", str(CORPUS_SEED), "--jobs", "2")
    assert len(rep["outcomes"]) == N_CASES
    assert not rep["bad"], json.dumps(rep["bad"][:10], indent=1)[:8000]
    # the mutations reach both ends: models that still run, and models refused with a clean error
    counts = {c: sum(o["class"] == c for o in rep["outcomes"]) for c in ("ok", "refused")}
    assert counts["ok"] > N_CASES // 20 and counts["refused"] > N_CASES // 20, counts
