"""The tests' side of ``rw_worker.py``: its environment and its runs in fresh processes, one per mode and batch of
models (``tests/realworld/test_realworld.py`` on the published corpus, ``tests/models/test_as_exported.py`` on
``models/as_exported``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import subprocess_env

WORKER = Path(__file__).resolve().parent / "rw_worker.py"


def worker_env() -> dict[str, str]:
    """conftest.subprocess_env (the developer build, or the installed wheel under ORTQUANT_TEST_INSTALLED) with no
    forced ISA (the user's default)."""
    env = subprocess_env()
    env.pop("ORTQUANT_ISA", None)
    return env


def run_worker(mode: str, corpus: Path, names: list[str], batch: int = 32, timeout: int = 1800) -> dict[str, Any]:
    """{name: the worker's result} for every model of ``names`` in ``corpus`` (``<name>.onnx`` and ``.npz``), one
    fresh worker process per ``batch`` models; a model the worker gave no result for (it crashed) gets an error."""
    out: dict[str, Any] = {}
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        proc = subprocess.run([sys.executable, str(WORKER), mode, str(corpus), *chunk], capture_output=True, text=True,
                              env=worker_env(), timeout=timeout, check=False)  # fmt: skip
        for line in proc.stdout.splitlines():
            if line.startswith("RW "):
                res = json.loads(line[3:])
                out[res["name"]] = res
        for n in chunk:  # a crash of the worker leaves the rest of its batch without a result
            out.setdefault(n, {"error": f"worker exited {proc.returncode}: {proc.stderr[-800:]}"})
    return out


def assert_exact(name: str, res: dict[str, Any]) -> None:
    """exact=True's claim for one worker result: every output equal to the stored qonnx reference bit for bit, or,
    where that reference was made on a CPU whose onnxruntime float kernels round differently (MLAS is
    ISA-specific), to qonnx run on this machine."""
    if all(e["bitexact"] for e in res["outputs"].values()):
        return
    assert "local" in res, f"{name}: differs from the stored reference and qonnx did not run here: {res}"
    for out, e in res["local"]["outputs"].items():
        assert e["bitexact"], f"{name}: output {out} differs from qonnx run on this machine: {e}"
