"""int8 GEMM: ortquant's LinearInt and raw GEMM engine vs onnxruntime MatMulInteger (u8 x s8 and s8 x s8).

Shapes M x K x N: 64x512x512, 256x1024x1024, 1024x1024x1024 and the batch-1 GEMV 1x1024x1024; 1 and 2 intra-op
threads. All onnxruntime-side figures come from sessions with the same options, inputs and outputs bound once
(IOBinding), the weights an initializer (packed at session creation on both sides), sampled alternately so machine
noise hits every side alike; each figure is the median of the samples. GOPS = 2*M*N*K / time.

- ortquant LinearInt o_bits=8: s8 x s8, int32 bias, luna requantization to int8 (the real op).
- ortquant LinearInt o_bits=32, ratio 1: the int32 sums, i.e. MatMulInteger's output (checked equal).
- ortquant raw GEMM: ortquant._C, the engine alone writing the int32 sums, one thread (no onnxruntime; its 2-thread
  counterpart is LinearInt o_bits=32 on onnxruntime's pool).
- ORT MatMulInteger u8 x s8 (MLAS's fast path) and s8 x s8 (MLAS's portable fallback on x86 without VNNI-INT8).
- The VNNI peak: back-to-back vpdpbusd on 12 accumulators (bench/micro_vnni_peak.cc, thread CPU time), per core.

    PYTHONPATH=python .venv/bin/python bench/bench_gemm.py [--samples N] [--threads 1,2] [--quick] [--act relu]

Activations are uniform over [-128, 127]; `--act relu` draws them as a ReLU leaves them (max(0, uniform)), which the
AVX2 engine detects per call and multiplies without the sign step. `--wmax 64` draws the weights from [-64, 64] (7-bit
weights), which the AVX2 engine multiplies with any activations without the sign step.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant import _C

IR_VERSION = 10
SHAPES = [(64, 512, 512), (256, 1024, 1024), (1024, 1024, 1024), (1, 1024, 1024)]
NP2ONNX = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
           np.dtype(np.int32): TensorProto.INT32}  # fmt: skip


def _model(node: onnx.NodeProto, x: np.ndarray, out_dtype: np.dtype, out_shape: list[int], inits: list) -> bytes:
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", NP2ONNX[x.dtype], list(x.shape))],
        [helper.make_tensor_value_info("y", NP2ONNX[np.dtype(out_dtype)], out_shape)],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("thinker", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def matmul_integer(x: np.ndarray, b_kn: np.ndarray) -> bytes:
    """ORT MatMulInteger: y int32 = x @ B (B an int8 initializer [K, N], zero points absent)."""
    node = helper.make_node("MatMulInteger", ["x", "b"], ["y"])
    return _model(node, x, np.int32, [x.shape[0], b_kn.shape[1]], [numpy_helper.from_array(b_kn, "b")])


def linear_int(x: np.ndarray, w_nk: np.ndarray, bias: np.ndarray | None, o_bits: int, scale_o: float) -> bytes:
    """ortquant LinearInt with W [N, K] (and bias) initializers, scale_x = scale_w = 1."""
    inits = [numpy_helper.from_array(w_nk, "w")]
    names = ["x", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "bias"))
        names.append("bias")
    node = helper.make_node(
        "LinearInt", names, ["y"], domain="thinker", scale_x=1.0, scale_w=1.0, scale_o=scale_o, o_bits=o_bits
    )
    out = np.int8 if o_bits <= 8 else np.int32
    return _model(node, x, out, [x.shape[0], w_nk.shape[0]], inits)


def session_runner(model: bytes, threads: int, x: np.ndarray, y: np.ndarray) -> Callable[[], None]:
    """A no-argument function running the model once on x into y (IOBinding, no allocation per run)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    ortquant.register(so)
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, y.dtype, list(y.shape), y.ctypes.data)
    return lambda: sess.run_with_iobinding(binding)


def timed(fn: Callable[[], object], inner: int) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def alternating_medians(
    fns: list[Callable[[], object]], samples: int, inner: int, now: Callable[[], float] = time.perf_counter
) -> list[float]:
    """Median seconds per call of each function: one warm-up call each, then `samples` rounds in which each function
    runs `inner` times back to back, the functions alternating; `now` is the clock (e.g. time.thread_time)."""
    for f in fns:
        f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for t, f in zip(times, fns, strict=True):
            t0 = now()
            for _ in range(inner):
                f()
            t.append((now() - t0) / inner)
    return [statistics.median(t) for t in times]


def compare(fns: list[Callable[[], object]], samples: int, inners: list[int]) -> list[tuple[float, float]]:
    """(median, minimum) seconds per call of each function, sampled alternately after one warm-up sample."""
    for fn, inner in zip(fns, inners, strict=True):
        timed(fn, inner)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for t, fn, inner in zip(times, fns, inners, strict=True):
            t.append(timed(fn, inner))
    return [(statistics.median(t), min(t)) for t in times]


def vnni_peak() -> float | None:
    """GOPS of back-to-back vpdpbusd on one core (None when it cannot be built here)."""
    here = Path(__file__).resolve().parent
    exe = here.parent / "build" / "micro_vnni_peak"
    if not exe.exists():
        cxx = shutil.which("g++") or shutil.which("c++")
        if cxx is None or "avx512vnni" not in _C.gemm_kernels():
            return None
        exe.parent.mkdir(exist_ok=True)
        cmd = [cxx, "-O2", "-mavx512f", "-mavx512vnni", str(here / "micro_vnni_peak.cc"), "-o", str(exe)]
        if subprocess.call(cmd) != 0:
            return None
    out = subprocess.run([str(exe), "10000000"], capture_output=True, text=True, check=True).stdout
    return float(out.strip())


def main() -> int:
    """Runs the benchmark and prints one table per shape."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=11, help="timed samples per figure (median reported)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="two small shapes, few samples (a smoke test)")
    ap.add_argument("--with-min", action="store_true", help="weights in [-128, 127] instead of [-127, 127]")
    ap.add_argument("--act", choices=["signed", "relu"], default="signed", help="activation distribution")
    ap.add_argument("--wmax", type=int, default=0, help="weights in [-WMAX, WMAX] (1-127; 0: see --with-min)")
    args = ap.parse_args()
    if not 0 <= args.wmax <= 127:
        ap.error(f"--wmax must be in [0, 127], got {args.wmax}")
    samples = 3 if args.quick else args.samples
    threads_list = [int(t) for t in args.threads.split(",")]
    shapes = [(64, 512, 512), (1, 1024, 1024)] if args.quick else SHAPES
    peak = vnni_peak()
    print(
        f"onnxruntime {ort.__version__}; ortquant {ortquant.__version__}; GEMM kernel {_C.gemm_kernel()}; "
        f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; "
        f"VNNI peak per core {'n/a' if peak is None else f'{peak:.0f} GOPS'}"
    )
    print(
        f"activations {args.act}; weights in [{-args.wmax if args.wmax else -128 if args.with_min else -127}, "
        f"{args.wmax if args.wmax else 127}]; median of {samples} samples, GOPS = 2*M*N*K / time; "
        "ratio = ortquant LinearInt(o_bits=8) GOPS / ORT GOPS"
    )
    rng = np.random.default_rng(0)
    for m, k, n in shapes:
        ops = 2.0 * m * n * k
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        if args.act == "relu":
            a = np.maximum(a, 0)
        au = (a.astype(np.int16) + 128).astype(np.uint8)
        # Symmetrically quantized weights ([-127, 127], as linger exports them; --with-min: [-128, 127], which
        # the AVX2 engine multiplies with w ^ (x < 0) and a per-row correction instead of vpsignb).
        lo, hi = (-args.wmax, args.wmax) if args.wmax else (-128 if args.with_min else -127, 127)
        w = rng.integers(lo, hi + 1, (n, k), dtype=np.int8)
        b_kn = np.ascontiguousarray(w.T)
        bias = rng.integers(-(2**16), 2**16, n).astype(np.int32)
        packed = _C.PackedGemmRows(w)
        print(f"\n== M x K x N = {m} x {k} x {n} ==")
        header = (
            f"{'threads':>7} {'LinearInt o8':>13} {'LinearInt o32':>14} {'raw GEMM':>9} {'ORT u8s8':>9} "
            f"{'ORT s8s8':>9} {'vs u8s8':>8} {'vs s8s8':>8} {'% peak':>7}"
        )
        print(header + "   (GOPS)")
        print("-" * len(header))
        for threads in threads_list:
            y8 = np.empty((m, n), np.int8)
            y32 = np.empty((m, n), np.int32)
            yu = np.empty((m, n), np.int32)
            ys = np.empty((m, n), np.int32)
            fns = [
                session_runner(linear_int(a, w, bias, 8, 2.0**-12), threads, a, y8),
                session_runner(linear_int(a, w, None, 32, 1.0), threads, a, y32),
                lambda p=packed, a=a: p.run(a, kind="raw"),
                session_runner(matmul_integer(au, b_kn), threads, au, yu),
                session_runner(matmul_integer(a, b_kn), threads, a, ys),
            ]
            # ~20 ms per sample for the fast sides; the s8s8 side gets the same number of calls up to 1 s.
            fast = max(1, int(0.02 * 800e9 / ops / threads))
            slow = max(1, min(fast, int(1.0 * 40e9 / ops)))
            if threads != 1:
                fns[2] = lambda: None  # raw GEMM: one thread only (see the header)
            res = compare(fns, samples, [fast, fast, fast, fast, slow])
            gops = [ops / t / 1e9 for t, _ in res]
            assert np.array_equal(y32, ys), "LinearInt o_bits=32 differs from MatMulInteger"
            raw = f"{gops[2]:.0f}" if threads == 1 else "-"
            pct = "" if peak is None else f"{100 * gops[0] / (peak * threads):6.0f}%"
            print(
                f"{threads:>7} {gops[0]:13.0f} {gops[1]:14.0f} {raw:>9} {gops[3]:9.0f} {gops[4]:9.1f} "
                f"{gops[0] / gops[3]:7.2f}x {gops[0] / gops[4]:7.1f}x {pct:>7}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
