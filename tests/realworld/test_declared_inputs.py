"""Published models whose graph input declares an integer type (``finn_datatype`` UINT8 / BIPOLAR in the graph's
``quantization_annotation``), passed unmodified to the public API in fresh processes: integer mode lowers the layer
reading that input (its grid is the declaration's promise, docs/ops.md "The grid path"), agrees with qonnx on the
stored integer-valued input, and stops with an error naming the declaration when fed values off it, where a
silent rounding would have changed the answer."""

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
if not (CORPUS / "manifest.json").is_file():
    pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)", allow_module_level=True)

# model -> (the layer reading the declared input, the declaration as the error names it)
MODELS = {
    "qonnx_eltwise_chanlast": ("Conv_0", "input 'global_in' (finn_datatype UINT8)"),
    "zoo_unsw_nb15_mlp_w2a2": ("/pretrained/pretrained.0/Gemm", "input 'onnx::Add_0' (finn_datatype BIPOLAR)"),
}

_RUN = r"""
import json, sys
import numpy as np
import ortquant

path, npz = sys.argv[1], sys.argv[2]
data = np.load(npz)
feeds = {k[3:]: v for k, v in data.items() if k.startswith("in:")}
refs = [v for k, v in data.items() if k.startswith("out:")]
sess = ortquant.InferenceSession(path, integer=True)
y = sess.run(None, feeds)[0]
out = {"max_abs": float(np.max(np.abs(y - refs[0]))), "ref_range": float(np.ptp(refs[0]))}
name = next(iter(feeds))
near = dict(feeds)
near[name] = feeds[name].copy()
near[name].flat[1] += np.float32(0.004)  # qonnx rounds annotated tensors within 0.01: the same answer
out["near_equal"] = bool(np.array_equal(sess.run(None, near)[0], y))
off = dict(feeds)
off[name] = feeds[name].copy()
off[name].flat[1] += np.float32(0.25)
try:
    sess.run(None, off)
    out["off_error"] = None
except Exception as e:
    out["off_error"] = str(e)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("name", sorted(MODELS))
def test_declared_input_lowered_checked_and_named(name: str) -> None:
    layer, declared = MODELS[name]
    path = CORPUS / f"{name}.onnx"
    check = subprocess.run([sys.executable, "-m", "ortquant", "check", "--integer", str(path)], capture_output=True,
                           text=True, env=subprocess_env(), timeout=600, check=False)  # fmt: skip
    assert check.returncode == 0, check.stderr[-2000:]
    row = next((ln for ln in check.stdout.splitlines() if ln.startswith("int ") and f" {layer} " in ln), None)
    assert row is not None, check.stdout[-3000:]
    assert f"declared by {declared}" in row, row
    run = subprocess.run([sys.executable, "-c", _RUN, str(path), str(path.with_suffix(".npz"))],
                         capture_output=True, text=True, env=subprocess_env(), timeout=600, check=False)  # fmt: skip
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, run.stderr[-2000:]
    res = json.loads(line[len("RESULT ") :])
    assert res["max_abs"] <= 0.02 * res["ref_range"], res  # the integer-mode contract against qonnx
    assert res["near_equal"], res
    assert res["off_error"] is not None, "a value 0.25 off the declared type ran without an error"
    assert f"declares {declared}" in res["off_error"] and f"'{layer}'" in res["off_error"], res["off_error"]
