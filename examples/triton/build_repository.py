"""Build a Triton model repository for ortquant: the prepared model, its config and the op library.

    python examples/triton/build_repository.py OUT_DIR [MODEL.onnx]

writes
    OUT_DIR/model_repository/cnn_w4a4/config.pbtxt     (copied from examples/triton/model_repository)
    OUT_DIR/model_repository/cnn_w4a4/1/model.onnx     (ortquant.prepare_model of MODEL, default models/cnn_w4a4.onnx)
    OUT_DIR/ortquant/libortquant.so                    (ortquant.library_path())

and prints the docker command that serves it (Triton container 24.12-py3 or later; docs/serving.md).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import onnx

import ortquant

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def build(out: Path, model: Path) -> Path:
    """Write the repository under ``out``; returns the model repository's path."""
    repo = out / "model_repository"
    version = repo / "cnn_w4a4" / "1"
    version.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "model_repository" / "cnn_w4a4" / "config.pbtxt", version.parent / "config.pbtxt")
    # The onnxruntime backend loads the file as it is: give it the rewrites ortquant.InferenceSession does in Python.
    onnx.save(ortquant.prepare_model(str(model)), version / "model.onnx")
    (out / "ortquant").mkdir(exist_ok=True)
    shutil.copy(ortquant.library_path(), out / "ortquant" / "libortquant.so")
    return repo


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    repo = build(out, Path(sys.argv[2]) if len(sys.argv) == 3 else REPO / "models" / "cnn_w4a4.onnx")
    print(f"model repository: {repo}")
    print(
        f"serve it: docker run --rm -p 8000:8000 -p 8001:8001 -v {repo}:/models -v {out / 'ortquant'}:/opt/ortquant "
        "nvcr.io/nvidia/tritonserver:24.12-py3 tritonserver --model-repository=/models"
    )
