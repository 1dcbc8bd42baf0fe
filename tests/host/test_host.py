"""Runs the C++ host program (tests/host/host_test.cc, built by CMake as ortquant_host_test) against the
onnxruntime shared library of the installed wheel: onnxruntime and libortquant.so driven from C++, no Python
in the loop. This file only writes models and tensor files and runs the binary; it builds nothing.

The binary is looked up in $ORTQUANT_BUILD_DIR (default: ./build at the repository root).

Adding another op: build a model with onnx.helper, write its inputs and the expected outputs (from the numpy
reference) with write_tensor(), and call the binary's `run` (or `expect-error`) command; see
test_run_per_channel_quant_from_files.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, NP_TO_ONNX, make_node_model
from ortquant.reference import qonnx as ref

REPO = Path(__file__).resolve().parents[2]
QONNX = "qonnx.custom_op.general"


def _binary() -> Path:
    build = Path(os.environ.get("ORTQUANT_BUILD_DIR", REPO / "build"))
    return build / "ortquant_host_test"


def _ort_library() -> Path:
    capi = Path(ort.__file__).resolve().parent / "capi"
    libs = sorted(capi.glob("libonnxruntime.so*"))
    if not libs:
        pytest.skip(f"no libonnxruntime.so* in {capi}")
    return libs[-1]


@pytest.fixture(scope="module")
def host() -> list[str]:
    """The command prefix: binary, onnxruntime library, ortquant library."""
    exe = _binary()
    if not exe.is_file():
        pytest.skip(f"host test binary not built: {exe} (run `make build`, or set ORTQUANT_BUILD_DIR)")
    return [str(exe), "--ort", str(_ort_library()), "--ops", ortquant.library_path()]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _ok(cmd: list[str]) -> str:
    r = _run(cmd)
    assert r.returncode == 0, f"{' '.join(cmd)}\nexit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r.stdout


def write_tensor(path: Path, arr: np.ndarray) -> str:
    """Writes arr in the host test's tensor file format; returns the path as a string."""
    arr = np.ascontiguousarray(arr)
    header = b"OQT1" + struct.pack("<II", NP_TO_ONNX[arr.dtype], arr.ndim) + struct.pack(f"<{arr.ndim}q", *arr.shape)
    path.write_bytes(header + arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    return str(path)


def _ramp_model(
    path: Path,
    n: int,
    scale_log2: int,
    zeropt: int,
    bits: int,
    signed: bool,
    narrow: bool,
    mode: str,
    int_bitwidth: bool,
) -> str:
    """y = Quant(x, 2^scale_log2, zeropt, bits) on input x [n], parameters as initializers."""
    bw = np.int32(bits) if int_bitwidth else np.float32(bits)
    inits = [
        numpy_helper.from_array(np.float32(2.0**scale_log2), "scale"),
        numpy_helper.from_array(np.float32(zeropt), "zeropt"),
        numpy_helper.from_array(np.asarray(bw), "bitwidth"),
    ]
    node = helper.make_node(
        "Quant",
        ["x", "scale", "zeropt", "bitwidth"],
        ["y"],
        domain=QONNX,
        name="ramp_quant",
        signed=int(signed),
        narrow=int(narrow),
        rounding_mode=mode,
    )
    graph = helper.make_graph(
        [node],
        "ramp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(QONNX, 1)],
    )
    model.ir_version = IR_VERSION
    onnx.save(model, path)
    return str(path)


RAMP_CASES = [
    # n, scale_log2, zeropt, bits, signed, narrow, mode
    (2101, -2, 0, 8, True, False, "ROUND"),
    (1001, 0, 3, 4, False, True, "FLOOR"),
    (777, -1, -2, 5, True, True, "CEIL"),
    (777, 1, 0, 3, True, False, "DOWN"),
    (
        200_003,
        -3,
        0,
        8,
        True,
        False,
        "ROUND",
    ),  # large enough to be split across threads
]


@pytest.mark.parametrize("case", RAMP_CASES, ids=lambda c: f"n{c[0]}-s{c[1]}-z{c[2]}-b{c[3]}-{c[6]}")
@pytest.mark.parametrize("int_bitwidth", [False, True], ids=["f32bw", "i32bw"])
def test_quant_ramp_exact(host, tmp_path, case, int_bitwidth):
    """The C++ program checks y against expectations it computes in exact integer arithmetic."""
    n, s, z, bits, signed, narrow, mode = case
    model = _ramp_model(tmp_path / "ramp.onnx", n, s, z, bits, signed, narrow, mode, int_bitwidth)
    args = [
        model,
        str(n),
        str(s),
        str(z),
        str(bits),
        str(int(signed)),
        str(int(narrow)),
        mode,
    ]
    out = _ok([*host, "quant-ramp", *args])
    assert "bit-exact" in out
    # The case is meaningful: several levels, both clamps.
    x = np.ldexp((np.arange(n) - n // 2).astype(np.float32), -4)
    want = ref.quant(x, np.float32(2.0**s), np.float32(z), np.float32(bits), signed, narrow, mode)
    assert np.unique(want).size > 4  # the ramp spans several quantization levels
    lo, hi = ref.int_bounds(signed, narrow, np.float32(bits))
    q = x / np.float32(2.0**s) + np.float32(z)
    assert (q > hi).any() and (q < lo).any()  # and the clamps are exercised at both ends


@pytest.mark.parametrize("register", ["v2", "legacy", "function"])
@pytest.mark.parametrize("threads", [1, 2])
def test_quant_ramp_threads_and_registration(host, tmp_path, register, threads):
    n = 300_001
    model = _ramp_model(tmp_path / "ramp.onnx", n, -2, 1, 8, True, False, "ROUND", False)
    out = _ok(
        [
            *host,
            "--threads",
            str(threads),
            "--register",
            register,
            "quant-ramp",
            model,
            str(n),
            "-2",
            "1",
            "8",
            "1",
            "0",
            "ROUND",
        ]
    )
    assert f"threads={threads}" in out and f"register={register}" in out
    if register == "function":
        assert f"ortquant {ortquant.__version__}" in out


def test_ramp_detects_a_wrong_model(host, tmp_path):
    """The checker is not vacuous: a model that quantizes differently from what the program expects fails."""
    model = _ramp_model(tmp_path / "ramp.onnx", 1001, -2, 0, 8, True, False, "FLOOR", False)
    r = _run([*host, "quant-ramp", model, "1001", "-2", "0", "8", "1", "0", "ROUND"])
    assert r.returncode == 1 and "elements differ" in r.stderr, r.stderr


def _per_channel_case(tmp_path: Path, rng: np.random.Generator):
    x = (rng.standard_normal((2, 3, 5, 7)) * 4).astype(np.float32)
    x.reshape(-1)[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5]
    s = rng.uniform(0.05, 1.0, (1, 3, 1, 1)).astype(np.float32)
    z = np.float32(0)
    b = np.float32(6)
    model, feeds = make_node_model(
        "Quant",
        QONNX,
        [x, s, z, b],
        const=[False, True, True, True],
        attrs={"signed": 1, "narrow": 0, "rounding_mode": "HALF_UP"},
    )
    path = tmp_path / "pc.onnx"
    onnx.save(model, path)
    ((name, arr),) = feeds.items()
    want = ref.quant(x, s, z, b, True, False, "HALF_UP")
    return str(path), name, arr, want


def test_run_per_channel_quant_from_files(host, tmp_path, rng):
    model, name, x, want = _per_channel_case(tmp_path, rng)
    args = [
        "--in",
        f"{name}={write_tensor(tmp_path / 'x.bin', x)}",
        "--expect",
        f"out0={write_tensor(tmp_path / 'y.bin', want)}",
    ]
    for threads in ("1", "2"):
        out = _ok([*host, "--threads", threads, "run", model, *args])
        assert "1 output(s) bit-exact" in out


@pytest.mark.parametrize("register", ["legacy", "v2", "function"])
@pytest.mark.parametrize("global_pool", [False, True], ids=["session-pools", "global-pool"])
def test_triton_replay(host, tmp_path, rng, register, global_pool):
    """Triton's onnxruntime-backend lifecycle (see host_test.cc: triton) on the installed onnxruntime; every
    release Triton ships is covered by test_ort_versions.py."""
    model, name, x, want = _per_channel_case(tmp_path, rng)
    args = [
        "--in",
        f"{name}={write_tensor(tmp_path / 'x.bin', x)}",
        "--expect",
        f"out0={write_tensor(tmp_path / 'y.bin', want)}",
    ]
    pool = ["--global-pool"] if global_pool else []
    out = _ok([*host, "--threads", "2", "--register", register, *pool, "triton", model, "--instances", "4",
               "--requests", "6", *args])  # fmt: skip
    # 4 x 6 requests + 1 after the reload; registrations: auto-complete + 4 instances + reload
    assert "4 instance(s), 25 request(s), 6 registration(s), 1 output(s) bit-exact" in out, out
    assert f"register={register}" in out and f"global-pool={int(global_pool)}" in out


def test_triton_replay_detects_a_wrong_expectation_and_a_missing_output(host, tmp_path, rng):
    model, name, x, want = _per_channel_case(tmp_path, rng)
    x_arg = f"{name}={write_tensor(tmp_path / 'x.bin', x)}"
    wrong = want.copy()
    wrong.reshape(-1)[3] = np.float32(123.0)
    r = _run([*host, "--register", "legacy", "triton", model, "--in", x_arg, "--expect",
              f"out0={write_tensor(tmp_path / 'w.bin', wrong)}"])  # fmt: skip
    assert r.returncode == 1 and "instance" in r.stderr and "index 3" in r.stderr, r.stderr
    r = _run([*host, "triton", model, "--in", x_arg, "--expect", f"nope={write_tensor(tmp_path / 'y.bin', want)}"])
    assert r.returncode == 1 and "auto-complete: the model has no output named nope" in r.stderr, r.stderr


def test_run_detects_a_wrong_expectation(host, tmp_path, rng):
    model, name, x, want = _per_channel_case(tmp_path, rng)
    wrong = want.copy()
    wrong.reshape(-1)[17] = np.nextafter(wrong.reshape(-1)[17], np.float32(np.inf))
    r = _run(
        [
            *host,
            "run",
            model,
            "--in",
            f"{name}={write_tensor(tmp_path / 'x.bin', x)}",
            "--expect",
            f"out0={write_tensor(tmp_path / 'y.bin', wrong)}",
        ]
    )
    assert r.returncode == 1 and "1 of 210 elements differ" in r.stderr and "index 17" in r.stderr, r.stderr


def test_unknown_rounding_mode_is_an_error_naming_the_node(host, tmp_path):
    model, _ = make_node_model(
        "Quant",
        QONNX,
        [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)],
        const=[False, True, True, True],
        attrs={"rounding_mode": "SIDEWAYS"},
    )
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    out = _ok(
        [
            *host,
            "expect-error",
            str(path),
            "--contains",
            "quant_node",
            "--contains",
            "rounding_mode",
            "--contains",
            "SIDEWAYS",
        ]
    )
    assert "expected error" in out


def test_expect_error_fails_on_a_good_model(host, tmp_path):
    model, _ = make_node_model(
        "Quant",
        QONNX,
        [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)],
        const=True,
    )
    path = tmp_path / "good.onnx"
    onnx.save(model, path)
    r = _run([*host, "expect-error", str(path), "--contains", "quant_node"])
    assert r.returncode == 1 and "without error" in r.stderr, r.stderr


def test_usage_errors(host, tmp_path):
    r = _run([host[0]])
    assert r.returncode == 2 and "usage" in r.stderr
    r = _run([*host, "--register", "sideways", "run", "m.onnx"])
    assert r.returncode == 2 and "--register" in r.stderr
    r = _run([*host, "--global-pool", "run", "m.onnx", "--expect", "y=f"])
    assert r.returncode == 2 and "--global-pool is for the triton command only" in r.stderr
    r = _run([*host, "triton", "m.onnx", "--instances", "0", "--expect", "y=f"])
    assert r.returncode == 2 and "--instances" in r.stderr


def test_missing_libraries_are_reported(host, tmp_path):
    r = _run(
        [
            host[0],
            "--ort",
            str(tmp_path / "nope.so"),
            "--ops",
            host[4],
            "run",
            "m.onnx",
            "--expect",
            "y=f",
        ]
    )
    assert r.returncode == 1 and "nope.so" in r.stderr
    model = _ramp_model(tmp_path / "ramp.onnx", 11, -2, 0, 8, True, False, "ROUND", False)
    r = _run(
        [
            *host[:4],
            str(tmp_path / "noops.so"),
            "quant-ramp",
            model,
            "11",
            "-2",
            "0",
            "8",
            "1",
            "0",
            "ROUND",
        ]
    )
    assert r.returncode == 1 and "RegisterCustomOpsLibrary_V2" in r.stderr and "noops.so" in r.stderr
