"""`pip wheel .` produces a wheel that installs into a fresh venv and runs a QONNX model there.

Slow (a full build plus a venv); set ORTQUANT_SKIP_WHEEL_TEST=1 to skip it during development. CI runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import assert_bitexact, make_node_model
from ortquant.reference import qonnx as ref

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys, numpy as np, onnx, ortquant
sess = ortquant.InferenceSession(onnx.load(sys.argv[1]))
x = np.load(sys.argv[2])
np.save(sys.argv[3], sess.run(None, {"in0": x})[0])
print(ortquant.__version__, ortquant.library_path())
"""


@pytest.mark.skipif(os.environ.get("ORTQUANT_SKIP_WHEEL_TEST") == "1", reason="ORTQUANT_SKIP_WHEEL_TEST=1")
def test_wheel_installs_into_fresh_venv_and_runs(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(dist), "-q"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = dist.glob("ortquant-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    r = subprocess.run(
        # onnxruntime is not a dependency of the wheel (issue 12): install the one this suite runs with
        [str(py), "-m", "pip", "install", "-q", str(wheel), f"onnxruntime=={ort.__version__}"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    x = np.linspace(-5, 5, 60, dtype=np.float32).reshape(3, 4, 5)
    s = np.array([0.25, 0.5, 1.0, 0.125], np.float32).reshape(1, 4, 1)
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [x, s, np.float32(0), np.float32(4)],
        const=[False, True, True, True],
        attrs={"signed": 1, "narrow": 0, "rounding_mode": "ROUND"},
    )
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "run.py").write_text(SCRIPT)
    # Run outside the source tree so the installed package, not python/ortquant, is imported.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORTQUANT_LIBRARY")}
    r = subprocess.run(
        [str(py), str(tmp_path / "run.py"), str(tmp_path / "m.onnx"), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert str(venv) in r.stdout, r.stdout  # the library came from the installed wheel
    y = np.load(tmp_path / "y.npy")
    assert_bitexact(y, ref.quant(x, s, np.float32(0), np.float32(4), True, False, "ROUND"))
