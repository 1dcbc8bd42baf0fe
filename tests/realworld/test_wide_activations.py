"""Integer mode on the published models whose layers read 16-bit activations (qonnx2mdc's MNIST CNN: unsigned
16-bit ReLU quantizers before its second convolution and its dense layer), through the public API in a fresh process
where nothing was registered first: the layers run as QConv / QGemm on two byte planes of the int8 engine, and the
outputs keep the integer-mode contract of tests/realworld/test_realworld.py (within 2 % of the output range, same
argmax), and within the same bound of the float execution on random inputs over the whole activation range.
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
MODEL = CORPUS / "qonnx2mdc_mnist.onnx"

if not MODEL.is_file():
    pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)", allow_module_level=True)

# Run in a fresh process: imports only numpy, onnx, onnxruntime and the public ortquant API.
SCRIPT = r"""
import contextlib, io, json, sys
import numpy as np
import onnx
import onnxruntime as ort
import ortquant
import ortquant.cli

path, npz_path = sys.argv[1], sys.argv[2]
prepared = ortquant.prepare_model(onnx.load(path), integer=True)
ops = [
    {"op": n.op_type, "name": n.name,
     "act_bits": next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "act_bits"), None)}
    for n in prepared.graph.node if n.domain == "ortquant.integer"
]
so = ort.SessionOptions()
so.log_severity_level = 3
so.intra_op_num_threads = 2
integer = ortquant.InferenceSession(path, so, integer=True)
plain = ortquant.InferenceSession(path, so)
npz = np.load(npz_path)
feeds = {k[3:]: npz[k] for k in npz.files if k.startswith("in:")}
ref = {k[4:]: npz[k] for k in npz.files if k.startswith("out:")}
names = [o.name for o in integer.get_outputs()]
stored = []
for name, out in zip(names, integer.run(None, feeds)):
    r = ref[name].astype(np.float64)
    stored.append({"max_abs": float(np.max(np.abs(out - r))), "range": float(r.max() - r.min()),
                   "argmax": [int(np.argmax(out)), int(np.argmax(r))]})
rng = np.random.default_rng(0)
inp = integer.get_inputs()[0]
x = rng.uniform(0.0, 1.0, (16, *inp.shape[1:])).astype(np.float32)
random = []
for xi in x:
    (a,) = integer.run(None, {inp.name: xi[None]})
    (b,) = plain.run(None, {inp.name: xi[None]})
    random.append({"max_abs": float(np.max(np.abs(a - b))), "range": float(b.max() - b.min()),
                   "argmax": [int(np.argmax(a)), int(np.argmax(b))]})
buf = io.StringIO()
with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
    rc = ortquant.cli.main(["check", path, "--integer"])
print("RESULT " + json.dumps({"ops": ops, "stored": stored, "random": random, "check": buf.getvalue(), "rc": rc}))
"""


@pytest.fixture(scope="module")
def result() -> dict:
    env = subprocess_env()
    env.pop("ORTQUANT_ISA", None)
    env.pop("ORTQUANT_INTEGER_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(MODEL), str(MODEL.with_suffix(".npz"))],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, f"the worker failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(line[len("RESULT ") :])


def test_16bit_layers_are_lowered(result: dict) -> None:
    wide = sorted((o["name"], o["op"]) for o in result["ops"] if o["act_bits"] == 16)
    assert wide == [("Conv_1", "QConv"), ("MatMul_0", "QGemm")], result["ops"]


def test_check_report_names_the_byte_planes(result: dict) -> None:
    report = result["check"]
    assert result["rc"] in (0, None), report
    assert "2 of 3 layer(s) on the integer path" in report, report
    lines = [ln for ln in report.splitlines() if "Conv_1" in ln or "MatMul_0" in ln]
    assert len(lines) >= 2 and all("two byte planes" in ln for ln in lines[:2]), report
    assert "at most 8" not in report, report


def test_stored_inputs_within_the_integer_contract(result: dict) -> None:
    for e in result["stored"]:
        assert e["max_abs"] <= 0.02 * e["range"], e
        assert e["argmax"][0] == e["argmax"][1], e


def test_random_inputs_within_the_integer_contract_of_float_execution(result: dict) -> None:
    for e in result["random"]:
        assert e["max_abs"] <= 0.02 * max(e["range"], 1e-6), e
    agree = sum(e["argmax"][0] == e["argmax"][1] for e in result["random"])
    assert agree >= len(result["random"]) - 1, result["random"]
