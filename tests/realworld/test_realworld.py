"""The published models of ``../shared/conformance/realworld`` (94 files nobody on this project made), each passed
unmodified to the public API in fresh processes where nothing was registered or set up first.

One subprocess per mode and batch of models runs ``rw_worker.py`` (it imports only numpy, onnx and ``ortquant``);
the tests read its per-model results. Modes and what passes (the corpus README's definition):

- ``default``: ``ortquant.InferenceSession(path)``: every output within 1e-5 of max|reference|, same argmax.
- ``exact``: ``exact=True``: every output equal to qonnx's bit for bit: the stored reference, or where that was
  made on a CPU whose onnxruntime float kernels round differently (MLAS is ISA-specific: qkt_qconv2d_conversion's
  Softmax gives a denormal 1e-45 on one machine and 0 on an AVX2 Zen 3), qonnx run on this machine.
- ``integer``: ``integer=True``: the integer-mode contract at model level (docs/ops.md, "Integer mode"): within
  2 % of the output range, same argmax.
- ``prepare``: ``ortquant prepare IN OUT`` and a plain onnxruntime session with only the library registered (the
  C/C++ host path): as ``default``.
- ``check``: ``ortquant check MODEL`` prints its report, exit status 0, no traceback.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from realworld.rw_client import assert_exact, run_worker

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("ORTQUANT_REALWORLD", ROOT.parent / "shared" / "conformance" / "realworld"))
BATCH = 32  # models per worker process

if not (CORPUS / "manifest.json").is_file():
    pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)", allow_module_level=True)

MANIFEST: dict[str, dict[str, Any]] = {m["name"]: m for m in json.loads((CORPUS / "manifest.json").read_text())}
NAMES = sorted(MANIFEST)
# The corpus README: the shipped output of this thinker model does not belong to it; it is for loading only.
LOAD_ONLY = {n for n, m in MANIFEST.items() if not m.get("ref_ok", True)} | {"thinker_resnet18_cifar100"}
# thinker models: the reference is LISTENAI's engine, not qonnx; no bit-exact claim (docs/ops.md, linger).
NOT_QONNX = {n for n in NAMES if n.startswith("thinker_")}


@functools.cache
def _results(mode: str) -> dict[str, dict[str, Any]]:
    return run_worker(mode, CORPUS, NAMES, BATCH)


def _result(mode: str, name: str) -> dict[str, Any]:
    res = _results(mode)[name]
    assert "error" not in res, f"{name} ({mode}): {res['error']}\n{res.get('trace', '')}"
    for out, entry in res["outputs"].items():
        assert not entry.get("missing"), f"{name}: output {out} missing"
        assert entry["shape_ok"], f"{name}: output {out} has another shape"
    return res


def _check_close(name: str, res: dict[str, Any]) -> None:
    if name in LOAD_ONLY:
        return
    for out, e in res["outputs"].items():
        assert not e["nan_mismatch"], f"{name}: output {out}: NaN where the reference has none (or the reverse)"
        assert e["max_abs"] <= 1e-5 * max(e["ref_max"], 1e-30), f"{name}: output {out}: {e}"
        if "argmax" in e:
            assert e["argmax"][0] == e["argmax"][1], f"{name}: output {out}: argmax {e['argmax']}"


@pytest.mark.parametrize("name", NAMES)
def test_default(name: str) -> None:
    _check_close(name, _result("default", name))


@pytest.mark.parametrize("name", NAMES)
def test_prepare_then_plain_onnxruntime(name: str) -> None:
    _check_close(name, _result("prepare", name))


@pytest.mark.parametrize("name", NAMES)
def test_exact(name: str) -> None:
    res = _result("exact", name)
    if name in LOAD_ONLY or name in NOT_QONNX:
        _check_close(name, res)
        return
    assert_exact(name, res)


@pytest.mark.parametrize("name", NAMES)
def test_integer(name: str) -> None:
    res = _result("integer", name)
    if name in LOAD_ONLY:
        return
    for out, e in res["outputs"].items():
        assert not e["nan_mismatch"], f"{name}: output {out}: NaN mismatch"
        assert e["max_abs"] <= 0.02 * max(e["ref_range"], 1e-30) or e["max_abs"] <= 1e-5 * e["ref_max"], (
            f"{name}: output {out}: {e}"
        )
        if "argmax" in e:
            assert e["argmax"][0] == e["argmax"][1], f"{name}: output {out}: argmax {e['argmax']}"


@pytest.mark.parametrize("name", NAMES)
def test_check_report(name: str) -> None:
    res = _results("check")[name]
    assert "error" not in res, res
    assert not res["traceback"], res["report"]
    assert res["rc"] in (0, None), res["report"]
