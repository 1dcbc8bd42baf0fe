"""Triton's way of loading ortquant, replayed without Triton, against every onnxruntime release Triton ships.

For each release in ``ort_versions.TRITON_ORT_VERSIONS`` (unpacked from its PyPI wheel into a cache outside git by
``tests/host/ort_versions.py``):

- the Python path: a subprocess that imports *that* onnxruntime release (its unpacked package first on
  PYTHONPATH) runs ``ortquant.InferenceSession`` on each case and saves the outputs;
- the C++ host (``ortquant_host_test triton``) replays the model lifecycle of Triton's onnxruntime backend on the
  same release: legacy ``RegisterCustomOpsLibrary`` on a clone of the model's options once for config
  auto-complete and once per instance, graph optimization ORT_ENABLE_ALL, instances created and serving
  concurrently, a model reload, the library never unloaded; every output compared bit for bit with the Python
  path's. Also with one global thread pool (Triton's ``enable-global-threadpool``) and with
  ``RegisterCustomOpsLibrary_V2``.
- and, through the Python path of the release, every linger conformance case of tests/data/linger bit-exact with
  linger's outputs;
- independent of both: the linger cases' outputs equal linger's own (``tests/data/linger/*.npz``) bit for bit, and
  the QONNX model's are within the tolerance of qonnx's executor (``models/README.md``) as in
  tests/models/test_brevitas_models.py.

The module runs only with ``ORTQUANT_FETCH_ORT=1`` (``make test-ort-versions`` sets it; ``make test`` skips it, so CI
runs it once): a release missing from the cache is then downloaded, and a download failure fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import ort_versions
import pytest
from test_host import _binary, write_tensor

import ortquant
from conftest import assert_bitexact

REPO = Path(__file__).resolve().parents[2]
VERSIONS = list(ort_versions.TRITON_ORT_VERSIONS)

# (case id, model file, inputs npz, input keys in graph-input order, reference output keys or None, reference kind)
CASES = {
    # linger LSTM with lengths, bidirectional, three outputs (int8 LSTM cell, iq ops)
    "linger_lstm": (
        "tests/data/linger/lstm_len_tf_bidir.onnx",
        "tests/data/linger/lstm_len_tf_bidir.npz",
        ["x0", "x1"],
        ["y0", "y1", "y2"],
        "exact",
    ),
    # linger grouped strided Conv2dInt (the int8 GEMM engine) followed by Dequant
    "linger_conv": (
        "tests/data/linger/conv2d_group_s2.onnx",
        "tests/data/linger/conv2d_group_s2.npz",
        ["x0"],
        ["y0"],
        "exact",
    ),
    # Brevitas QONNX CNN: Quant (per-channel, 4/8 bit), Trunc, Conv/BN/ReLU in stock onnxruntime
    "qonnx_cnn": ("models/cnn_w4a4.onnx", "models/cnn_w4a4.npz", ["input_b4"], ["output_b4"], "close"),
}
MAX_REL_DIFF = 1e-6  # the tolerance of tests/models/test_brevitas_models.py against qonnx's executor

_PYTHON_PATH_SCRIPT = r"""
import json, sys
import numpy as np, onnx, onnxruntime, ortquant
jobs = json.loads(sys.argv[1])
for job in jobs:
    sess = ortquant.InferenceSession(job["model"])  # default options: graph optimization ORT_ENABLE_ALL
    data = np.load(job["inputs"])
    feeds = {i.name: data[k] for i, k in zip(sess.get_inputs(), job["keys"], strict=True)}
    outs = sess.run(None, feeds)
    np.savez(job["out"], **{o.name: v for o, v in zip(sess.get_outputs(), outs, strict=True)})
print(onnxruntime.__version__)
"""


@pytest.fixture(scope="module", params=VERSIONS)
def release(request) -> tuple[str, Path]:
    version = request.param
    if os.environ.get("ORTQUANT_FETCH_ORT") != "1":
        # `make test` leaves this to `make test-ort-versions` (CI runs both; this way it runs once)
        pytest.skip(f"onnxruntime {version}: run `make test-ort-versions` (sets ORTQUANT_FETCH_ORT=1)")
    return version, ort_versions.fetch(version)  # from the cache, or downloaded into it


@pytest.fixture(scope="module")
def cases(release, tmp_path_factory) -> dict[str, dict]:
    """Per case: the prepared model file, input files and the Python path's outputs on this release."""
    version, _ = release
    tmp = tmp_path_factory.mktemp(f"ort{version}")
    jobs, result = [], {}
    for cid, (model, npz, in_keys, ref_keys, kind) in CASES.items():
        # What a C host deploys: the model after prepare_model (`ortquant prepare IN OUT`); for these cases
        # prepare_model leaves the graph as it is or rewrites what onnxruntime needs.
        prepared = tmp / f"{cid}.onnx"
        onnx.save(ortquant.prepare_model(onnx.load(str(REPO / model))), prepared)
        jobs.append(
            {"model": str(prepared), "inputs": str(REPO / npz), "keys": in_keys, "out": str(tmp / f"{cid}.py.npz")}
        )
        result[cid] = {
            "model": str(prepared),
            "npz": REPO / npz,
            "in_keys": in_keys,
            "ref_keys": ref_keys,
            "kind": kind,
        }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ort_versions.site_dir(version)), str(REPO / "python")])
    env["ORTQUANT_LIBRARY"] = ortquant.library_path()
    r = subprocess.run(
        [sys.executable, "-c", _PYTHON_PATH_SCRIPT, json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, f"Python path on onnxruntime {version} failed:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip().splitlines()[-1] == version, r.stdout  # the subprocess really ran that release
    for cid, c in result.items():
        py = np.load(tmp / f"{cid}.py.npz")
        c["py"] = {k: py[k] for k in py.files}
        c["in_args"], c["out_args"] = [], []
        data = np.load(c["npz"])
        sess_inputs = [i.name for i in onnx.load(c["model"]).graph.input]
        for name, key in zip(sess_inputs, c["in_keys"], strict=True):
            c["in_args"] += ["--in", f"{name}={write_tensor(tmp / f'{cid}.{name}.in', data[key])}"]
        for name, arr in c["py"].items():
            c["out_args"] += ["--expect", f"{name}={write_tensor(tmp / f'{cid}.{name}.out', arr)}"]
        c["args"] = c["in_args"] + c["out_args"]
    return result


def _host(lib: Path, *args: str) -> str:
    exe = _binary()
    if not exe.is_file():
        pytest.skip(f"host test binary not built: {exe} (run `make build`, or set ORTQUANT_BUILD_DIR)")
    cmd = [str(exe), "--ort", str(lib), "--ops", ortquant.library_path(), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, f"{' '.join(cmd)}\nexit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r.stdout


@pytest.mark.parametrize("cid", list(CASES))
def test_python_path_matches_the_references(release, cases, cid):
    """The expectations the host is held to are themselves right on this release."""
    c = cases[cid]
    ref = np.load(c["npz"])
    got = list(c["py"].values())
    assert len(got) == len(c["ref_keys"])
    for arr, key in zip(got, c["ref_keys"], strict=True):
        want = ref[key]
        if c["kind"] == "exact":
            assert_bitexact(arr, want)
        else:
            assert arr.shape == want.shape and arr.dtype == want.dtype == np.float32
            rel = float(np.max(np.abs(arr.astype(np.float64) - want))) / float(np.max(np.abs(want)))
            assert rel <= MAX_REL_DIFF, (cid, key, rel)


@pytest.mark.parametrize("cid", list(CASES))
def test_triton_replay_legacy_registration(release, cases, cid):
    version, lib = release
    out = _host(
        lib,
        "--register",
        "legacy",
        "--threads",
        "1",
        "triton",
        cases[cid]["model"],
        "--instances",
        "3",
        "--requests",
        "4",
        *cases[cid]["args"],
    )
    assert f"onnxruntime {version}" in out
    n_out = len(cases[cid]["py"])
    # 3 instances x 4 requests + 1 after the reload; 1 (auto-complete) + 3 + 1 (reload) registrations
    assert f"3 instance(s), 13 request(s), 5 registration(s), {n_out} output(s) bit-exact" in out, out


def test_triton_replay_global_thread_pool(release, cases):
    _, lib = release
    c = cases["linger_conv"]
    out = _host(
        lib,
        "--register",
        "legacy",
        "--threads",
        "2",
        "--global-pool",
        "triton",
        c["model"],
        "--instances",
        "2",
        "--requests",
        "3",
        *c["args"],
    )
    assert "2 instance(s), 7 request(s), 4 registration(s), 1 output(s) bit-exact" in out and "global-pool=1" in out


def test_triton_replay_v2_registration_two_threads(release, cases):
    _, lib = release
    c = cases["qonnx_cnn"]
    out = _host(lib, "--threads", "2", "triton", c["model"], "--instances", "2", "--requests", "2", *c["args"])
    assert "register=v2" in out and "1 output(s) bit-exact" in out


def test_replay_detects_a_wrong_output(release, cases, tmp_path):
    """The comparison is not vacuous on this release: one ulp off in one element fails the replay."""
    _, lib = release
    c = cases["qonnx_cnn"]
    ((name, arr),) = c["py"].items()
    wrong = arr.copy()
    wrong.reshape(-1)[7] = np.nextafter(wrong.reshape(-1)[7], np.float32(np.inf))
    args = [*c["in_args"], "--expect", f"{name}={write_tensor(tmp_path / 'wrong.bin', wrong)}"]
    exe = _binary()
    if not exe.is_file():
        pytest.skip(f"host test binary not built: {exe}")
    r = subprocess.run(
        [
            str(exe),
            "--ort",
            str(lib),
            "--ops",
            ortquant.library_path(),
            "--register",
            "legacy",
            "triton",
            c["model"],
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 1 and "1 of 40 elements differ" in r.stderr and "index 7" in r.stderr, r.stderr


_CONFORMANCE_SCRIPT = r"""
import glob, json, os, sys
import numpy as np, onnxruntime, ortquant
bad = []
cases = sorted(glob.glob(os.path.join(sys.argv[1], "*.onnx")))
for f in cases:
    d = np.load(f[:-5] + ".npz")
    try:
        s = ortquant.InferenceSession(f)
        outs = s.run(None, {i.name: d[f"x{k}"] for k, i in enumerate(s.get_inputs())})
        for k, a in enumerate(outs):
            w = d[f"y{k}"]
            if a.dtype != w.dtype or a.shape != w.shape or a.tobytes() != w.tobytes():
                bad.append([os.path.basename(f), f"output {k} differs"])
    except Exception as e:
        bad.append([os.path.basename(f), str(e)[-200:]])
print(json.dumps({"version": onnxruntime.__version__, "cases": len(cases), "bad": bad}))
"""


def test_every_linger_conformance_case_on_this_release(release):
    """The Python path of this release on all of tests/data/linger: bit-exact with linger's own outputs."""
    version, _ = release
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ort_versions.site_dir(version)), str(REPO / "python")])
    env["ORTQUANT_LIBRARY"] = ortquant.library_path()
    data = REPO / "tests" / "data" / "linger"
    r = subprocess.run(
        [sys.executable, "-c", _CONFORMANCE_SCRIPT, str(data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["version"] == version and res["cases"] == len(list(data.glob("*.onnx"))) >= 50
    assert res["bad"] == [], res["bad"]
