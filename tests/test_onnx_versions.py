"""ortquant with the onnx package a user already has (pyproject: ``onnx>=1.16``), in fresh processes.

QKeras users export with TensorFlow 2.15 and tf2onnx, which hold onnx at 1.16-1.18; onnx 1.19 - 1.22 are what many
other environments pin. Two things differ there (`make onnx-matrix` runs this file with each of them):

- onnx before 1.19 has no Python shape-inference functions (no ``onnx.shape_inference.InferenceContext``): the
  schemas are registered without them and ``transforms._util.infer_shapes`` applies them itself, so integer mode
  sees the same shapes (a Gemm after a Quant has a known rank) and lowers the same layers.
- onnx 1.19 - 1.22 destroy their schema registry, with the Python inference functions in it, after the interpreter
  has shut down (a hang or a segmentation fault at exit): ``register_schemas`` removes ortquant's schemas again at
  exit, while Python still runs.

With the pinned onnx these run too (the same claims hold there).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import subprocess_env

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "models" / "as_exported" / "avgpool_head_w4a4.onnx"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**subprocess_env(), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_the_process_exits_cleanly_after_the_schemas_were_registered() -> None:
    proc = _run(
        "import numpy as np, onnx, ortquant\n"
        f"s = ortquant.InferenceSession({str(MODEL)!r}, integer=True)\n"
        "i = s.get_inputs()[0]\n"
        "shape = [1 if not isinstance(d, int) else d for d in i.shape]\n"
        "s.run(None, {i.name: np.zeros(shape, np.float32)})\n"
        "ortquant.register_schemas()\n"
        "print('onnx', onnx.__version__)\n"
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("onnx "), proc.stdout


def test_integer_mode_lowers_the_same_layers_with_this_onnx() -> None:
    # the Gemm reads Quant -> Flatten of a pooled convolution: its rank comes from the Quant's inferred output
    env = {**subprocess_env(), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "ortquant", "check", "--integer", str(MODEL)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "integer mode: 3 of 3 layer(s) on the integer path" in proc.stdout, proc.stdout


def test_every_mode_runs_a_published_model_with_this_onnx() -> None:
    corpus = REPO.parent / "shared" / "conformance" / "realworld"
    path = corpus / "qonnx_espcn_subpixel_w4a4.onnx"
    model = path if path.is_file() else REPO / "models" / "cnn4c2f_w4a4.onnx"
    proc = _run(
        "import numpy as np, ortquant\n"
        "out = []\n"
        "for kw in ({}, {'exact': True}, {'integer': True}):\n"
        f"    s = ortquant.InferenceSession({str(model)!r}, **kw)\n"
        "    i = s.get_inputs()[0]\n"
        "    shape = [1 if not isinstance(d, int) else d for d in i.shape]\n"
        "    x = np.random.default_rng(0).random(shape, dtype=np.float32)\n"
        "    out.append(s.run(None, {i.name: x})[0])\n"
        "print(float(np.abs(out[0] - out[1]).max()), float(np.abs(out[0] - out[2]).max()), float(np.ptp(out[1])))\n"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    d_exact, d_integer, span = (float(v) for v in proc.stdout.split())
    assert d_exact <= 1e-5 * max(span, 1.0)
    assert d_integer <= 0.02 * span  # the integer-mode contract at model level
