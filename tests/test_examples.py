"""Every program in examples/ runs, as a user would start it, and gives the outputs of the Python path.

- examples/python_session.py: in a fresh interpreter;
- examples/c_host/main.c: compiled with the C compiler (skipped without one) against the vendored C API header and
  the onnxruntime shared library of the installed onnxruntime package, run on the prepared model;
- examples/triton/: the repository it builds matches the model, and its model loads as Triton's onnxruntime backend
  loads it (only the op library registered; the C++ host's Triton replay too when the host binary is built);
- examples/ray_job.py: on a local Ray cluster (skipped when Ray is not installed).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortquant
from conftest import NP_TO_ONNX

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CNN = REPO / "models" / "cnn_w4a4.onnx"


def _run(cmd: list[str], timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, (
        f"{' '.join(cmd)}\nexit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    )
    return r


def test_python_session_example():
    out = _run([sys.executable, str(EXAMPLES / "python_session.py")], cwd=REPO).stdout
    assert f"ortquant {ortquant.__version__}" in out
    assert re.search(r"cnn_w4a4\.onnx: global_in \[4, 3, 32, 32\] -> \[4, 10\], classes \[\d, \d, \d, \d\]", out), out
    # The default session folds weight quantizers and lets onnxruntime fuse: float32 reordering at most.
    diff = re.search(r"plain onnxruntime session: max \|difference\| (\S+)", out)
    assert diff and float(diff.group(1)) < 1e-5, out


def _ort_library() -> Path:
    libs = sorted((Path(ort.__file__).resolve().parent / "capi").glob("libonnxruntime.so*"))
    if not libs:
        pytest.skip("the onnxruntime package has no libonnxruntime.so")
    return libs[-1]


def test_c_host_example(tmp_path, rng):
    cc = shutil.which("cc") or shutil.which("gcc") or pytest.skip("no C compiler")
    # The build line of examples/c_host/README.md for onnxruntime's Python package.
    libdir = tmp_path / "ortlib"
    libdir.mkdir()
    for name in ("libonnxruntime.so", "libonnxruntime.so.1"):
        (libdir / name).symlink_to(_ort_library())
    exe = tmp_path / "ortquant_c_host"
    _run(
        [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", "third_party/onnxruntime/include",
         "examples/c_host/main.c", "-o", str(exe), "-L", str(libdir), "-lonnxruntime", f"-Wl,-rpath,{libdir}"],
        cwd=REPO,
    )  # fmt: skip
    prepared = tmp_path / "cnn.prepared.onnx"
    onnx.save(ortquant.prepare_model(str(CNN)), prepared)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    x.tofile(tmp_path / "x.f32")
    out = _run([str(exe), str(prepared), ortquant.library_path(), str(tmp_path / "x.f32")]).stdout
    got = np.array([float(v) for v in out.split()], np.float32)
    (want,) = ortquant.InferenceSession(CNN).run(None, {"global_in": x})
    np.testing.assert_array_equal(got, want.reshape(-1))  # %.9g round-trips float32 exactly
    # A bad model path: onnxruntime's message, exit status 1, no crash.
    r = subprocess.run([str(exe), str(tmp_path / "none.onnx"), ortquant.library_path(), str(tmp_path / "x.f32")],
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode == 1 and "CreateSession failed" in r.stderr, r.stderr


def _config(path: Path) -> dict[str, object]:
    text = path.read_text()

    def get(pattern: str) -> str:
        m = re.search(pattern, text, re.M)
        assert m, f"{path}: no {pattern}"
        return m.group(1)

    def tensor(kind: str) -> tuple[str, list[int]]:
        return get(rf'^{kind} \[ {{ name: "([^"]+)"'), [
            int(d) for d in get(rf"^{kind} .*?dims: \[([^\]]+)\]").split(",")
        ]

    return {
        "name": get(r'^name: "([^"]+)"'),
        "max_batch_size": int(get(r"^max_batch_size: (\d+)")),
        "input": tensor("input"),
        "output": tensor("output"),
        "library": get(r'op_library_filename: "([^"]+)"'),
    }


def _write_tensor(path: Path, arr: np.ndarray) -> str:
    """The tensor file format of tests/host/host_test.cc."""
    header = b"OQT1" + struct.pack("<II", NP_TO_ONNX[arr.dtype], arr.ndim) + struct.pack(f"<{arr.ndim}q", *arr.shape)
    path.write_bytes(header + np.ascontiguousarray(arr).tobytes())
    return str(path)


def test_triton_repository_example(tmp_path, rng):
    r = _run([sys.executable, str(EXAMPLES / "triton" / "build_repository.py"), str(tmp_path)], cwd=REPO)
    assert "tritonserver --model-repository=/models" in r.stdout
    model_dir = tmp_path / "model_repository" / "cnn_w4a4"
    config = _config(model_dir / "config.pbtxt")
    assert config["name"] == model_dir.name
    assert config["library"] == "/opt/ortquant/libortquant.so"
    assert (tmp_path / "ortquant" / "libortquant.so").read_bytes() == Path(ortquant.library_path()).read_bytes()

    # The backend's view: the file as it is, only the op library registered, a batch dimension in front of `dims`.
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(tmp_path / "ortquant" / "libortquant.so"))
    sess = ort.InferenceSession(str(model_dir / "1" / "model.onnx"), so, providers=["CPUExecutionProvider"])
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    in_name, in_dims = config["input"]  # type: ignore[misc]
    out_name, out_dims = config["output"]  # type: ignore[misc]
    assert (inp.name, inp.shape[1:]) == (in_name, in_dims) and (out.name, out.shape[1:]) == (out_name, out_dims)
    assert not isinstance(inp.shape[0], int)  # batched by Triton: the first dimension must be free
    x = rng.standard_normal((config["max_batch_size"], *in_dims)).astype(np.float32)  # type: ignore[misc]
    (y,) = sess.run(None, {in_name: x})
    (want,) = ortquant.InferenceSession(CNN).run(None, {in_name: x})
    np.testing.assert_array_equal(y, want)

    host = Path(os.environ.get("ORTQUANT_BUILD_DIR", REPO / "build")) / "ortquant_host_test"
    if host.is_file():  # Triton's exact loading sequence (two instances, concurrent requests, a reload)
        _run([str(host), "--ort", str(_ort_library()), "--ops", ortquant.library_path(), "triton",
              str(model_dir / "1" / "model.onnx"), "--instances", "2", "--requests", "2",
              "--in", f"{in_name}={_write_tensor(tmp_path / 'x.bin', x)}",
              "--expect", f"{out_name}={_write_tensor(tmp_path / 'y.bin', want)}"])  # fmt: skip


def test_ray_job_example():
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]')")
    r = _run([sys.executable, str(EXAMPLES / "ray_job.py"), str(CNN), "256"], cwd=REPO, timeout=900)
    assert "256 rows" in r.stdout and "max |difference| to one local session: 0" in r.stdout, r.stdout
