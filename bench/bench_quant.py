"""QONNX Quant throughput: ortquant's op vs onnxruntime's QuantizeLinear+DequantizeLinear on the same tensor.

8-bit signed fake quantization (round half to even, saturate) of float32 tensors, per-tensor and per-channel
scale, 1 and 2 intra-op threads. Two sizes: 16M values (16x64x128x128, 64 MiB: memory-bound) and 64K values
(1x64x32x32, 256 KiB: cache-resident, shows the kernel's arithmetic). Both ops run in sessions with the same
options; outputs are bound to preallocated buffers (IOBinding) so the timings cover the kernels, not output
allocation; ours and theirs are sampled alternately so machine noise hits both alike; each figure is the
median of the samples. Also: ortquant._C on each ISA path (one thread) and a numpy copy of the same bytes (the
floor for an op that reads its input once and writes its output once).

    PYTHONPATH=python .venv/bin/python bench/bench_quant.py [--samples N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant import kernels

QONNX = "qonnx.custom_op.general"
IR_VERSION = 10
BIG = [16, 64, 128, 128]
SMALL = [1, 64, 32, 32]


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: list[int]) -> bytes:
    graph = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(QONNX, 1)])
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def quant_model(shape: list[int], scale: np.ndarray) -> bytes:
    """y = Quant(x, scale, 0, 8), signed, not narrow, ROUND (half to even)."""
    inits = [
        numpy_helper.from_array(scale, "s"),
        numpy_helper.from_array(np.float32(0), "z"),
        numpy_helper.from_array(np.float32(8), "b"),
    ]
    node = helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain=QONNX, signed=1, narrow=0)
    return _model([node], inits, shape)


def qdq_model(shape: list[int], scale: np.ndarray) -> bytes:
    """y = DequantizeLinear(QuantizeLinear(x, scale, int8 0)): the same values with standard ops."""
    per_channel = scale.size > 1
    s = scale.reshape(-1) if per_channel else scale.reshape(())
    zp = np.zeros(s.shape, np.int8)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")]
    kw = {"axis": 1} if per_channel else {}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], **kw),
        helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], **kw),
    ]
    return _model(nodes, inits, shape)


def session_runner(model: bytes, threads: int, x: np.ndarray, y: np.ndarray) -> Callable[[], None]:
    """A no-argument function running the model once on x into y."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    ortquant.register(so)
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
    return lambda: sess.run_with_iobinding(binding)


def timed(fn: Callable[[], object], inner: int) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(fns: list[Callable[[], object]], samples: int, inner: int, warmup: int = 2) -> list[tuple[float, float]]:
    """(median, minimum) microseconds per call of each function, sampled alternately."""
    for fn in fns:
        for _ in range(warmup):
            timed(fn, inner)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for t, fn in zip(times, fns, strict=True):
            t.append(timed(fn, inner))
    return [(statistics.median(t) * 1e6, min(t) * 1e6) for t in times]


def cpu_model() -> str:
    """lscpu's model name (platform.processor() as a fallback)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def main() -> int:
    """Runs the benchmark and prints the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=15, help="timed samples per figure (median reported)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="small tensors, few samples (a smoke test)")
    args = ap.parse_args()
    samples = 3 if args.quick else args.samples
    threads_list = [int(t) for t in args.threads.split(",")]
    sizes = [SMALL] if args.quick else [BIG, SMALL]

    print(
        f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); onnxruntime {ort.__version__}; "
        f"ortquant {ortquant.__version__}; ortquant ISA {kernels.active_isa()}; load average "
        + " ".join(f"{v:.1f}" for v in os.getloadavg())
    )
    print(
        f"median of {samples} samples; ratio = ORT Q+DQ median / ortquant median (> 1: ortquant is faster); "
        "ratio of min = the same for the fastest sample of each (least disturbed by other load)"
    )
    rng = np.random.default_rng(0)
    for shape in sizes:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        mbytes = 2 * x.nbytes / 1e6  # read x, write y
        # Enough calls per sample that one sample takes ~10 ms or more.
        inner = max(1, int(2e6 // x.size))
        scales = {
            "per-tensor": np.float32(0.05),
            "per-tensor 2^-4": np.float32(2.0**-4),
            "per-channel": rng.uniform(0.01, 0.1, (1, shape[1], 1, 1)).astype(np.float32),
        }
        print()
        print(f"== {'x'.join(map(str, shape))} float32: {x.size / 1e6:.3g}M values, {x.nbytes / 2**20:.3g} MiB ==")
        y_copy = np.empty_like(x)
        ((copy_us, copy_min),) = compare([lambda y=y_copy, x=x: np.copyto(y, x)], samples, inner)
        print(
            f"numpy copy of the same bytes: median {copy_us:.1f} us ({mbytes / copy_us * 1e3:.1f} GB/s read+write), "
            f"min {copy_min:.1f} us ({mbytes / copy_min * 1e3:.1f} GB/s)"
        )
        header = (
            f"{'case':<16} {'threads':>7} {'ortquant us':>12} {'ORT Q+DQ us':>12} {'ratio':>7} {'ortquant GB/s':>14}"
            f" {'ratio of min':>13}"
        )
        print(header)
        print("-" * len(header))
        for name, scale in scales.items():
            for threads in threads_list:
                y_ours, y_theirs = np.empty_like(x), np.empty_like(x)
                ours = session_runner(quant_model(shape, scale), threads, x, y_ours)
                theirs = session_runner(qdq_model(shape, scale), threads, x, y_theirs)
                (t_ours, m_ours), (t_theirs, m_theirs) = compare([ours, theirs], samples, inner)
                note = "" if np.array_equal(y_ours, y_theirs) else "   (outputs differ!)"
                print(
                    f"{name:<16} {threads:>7} {t_ours:12.1f} {t_theirs:12.1f} {t_theirs / t_ours:6.2f}x "
                    f"{mbytes / t_ours * 1e3:14.1f} {m_theirs / m_ours:12.2f}x{note}"
                )
        print("ortquant._C kernels.quant, one thread (allocates its output each call):")
        for name, scale in scales.items():
            for isa in ("scalar", "avx2", "avx512"):
                kernels.set_isa(isa)
                if kernels.active_isa() != isa:
                    print(f"  {name:<16} {isa:<7} (not supported on this CPU)")
                    continue
                ((t, t_min),) = compare(
                    [lambda s=scale, x=x: kernels.quant(x, s, np.float32(0), np.float32(8))], samples, inner
                )
                print(f"  {name:<16} {isa:<7} {t:10.1f} us  ({mbytes / t * 1e3:6.1f} GB/s)   min {t_min:10.1f} us")
            kernels.set_isa("")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
