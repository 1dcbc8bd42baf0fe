"""Integer mode's numeric contract on published models, layer by layer, on random inputs (docs/ops.md, "Integer
mode": exact integer sums and one rounding, so integer mode and qonnx's float32 execution may differ only where
qonnx's value before the next quantizer lies at one of its rounding boundaries, by one step).

``boundary_worker.py`` runs in a fresh process per model: qonnx executes the whole file once per seed; every span
from one activation quantizer to the next is cut out, must be lowered by integer mode, and runs in an
``ortquant.InferenceSession(..., integer=True)`` on qonnx's own input of that span. The model-level tests
(``test_realworld.py``) bound the end result; this one shows where each difference starts (ESPCN's outputs differ
from qonnx's by up to 3 steps of the last quantizer on random images: hidden quantizers' boundary cases, carried
through the layers after them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("ORTQUANT_REALWORLD", ROOT.parent / "shared" / "conformance" / "realworld"))
WORKER = Path(__file__).with_name("boundary_worker.py")

if not (CORPUS / "manifest.json").is_file():
    pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)", allow_module_level=True)
pytest.importorskip("qonnx")

# Linear chains of activation quantizers (each span one layer); seeds of the random inputs.
MODELS = {
    "qonnx_espcn_nn_resize_w4a4": "1,2,3",
    "qonnx_espcn_subpixel_w4a4": "1,2",
    "labs_gtsrb12_w2a3": "1,2,3,4",
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_differences_start_at_rounding_boundaries(name: str) -> None:
    env = {**subprocess_env(), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(CORPUS), name, MODELS[name]],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = [json.loads(x[3:]) for x in proc.stdout.splitlines() if x.startswith("BW ")]
    assert proc.returncode == 0 and len(lines) == len(MODELS[name].split(",")), proc.stderr[-3000:]
    for res in lines:
        assert len(res["spans"]) >= 3, res
        # the check can fail: few of qonnx's values lie near a boundary at all (a dense layer's coarse sums may
        # sit on one exactly, where both sides round the same exact tie)
        near, values = (sum(s[k] for s in res["spans"]) for k in ("near_boundary", "values"))
        assert near <= 0.05 * values, res
        for span in res["spans"]:
            where = f"{name} seed {res['seed']}, {span['span']}"
            assert span["float_layers"] == [], f"{where}: integer mode left {span['float_layers']} float"
            assert span["values"] > 0, where
            assert span["off_boundary"] == 0, f"{where}: differences away from a rounding boundary: {span}"
            assert span["max_steps"] <= 1 + 1e-6, f"{where}: more than one step: {span}"
