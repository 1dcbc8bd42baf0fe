"""linger elementwise ops on 4M-element tensors vs a numpy memcpy of the same bytes (issue 3's target: within
1.5x of the copy; they are bandwidth bound).

Ops: iqAdd and iqMul (int8 x int8, power-of-two scales as linger writes them), iqCat (two int8 halves with
different scales), Requant 8->16 and 16->8, Quant (float32 -> int8), Dequant (int8 -> float32). Each runs in an
onnxruntime session (ortquant registered, outputs bound to preallocated buffers with IOBinding so the timing
covers the kernel, not output allocation) with 1 and 2 intra-op threads, and through ortquant._C on each ISA path
(one thread; _C allocates its output). The baseline is np.copyto of (bytes read + bytes written) / 2 bytes, a copy
that moves the same total traffic, single-threaded. Figures are medians of alternating samples.

    PYTHONPATH=python .venv/bin/python bench/bench_linger_elementwise.py [--samples N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import ortquant
from ortquant import _C, kernels

IR_VERSION = 10
N = 4 * 1024 * 1024
NP_TO_ONNX = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int16): TensorProto.INT16,
              np.dtype(np.float32): TensorProto.FLOAT}  # fmt: skip


@dataclass
class Case:
    """One op: its node, inputs, output dtype and a _C call computing the same thing."""

    name: str
    op: str
    attrs: dict[str, object]
    inputs: list[np.ndarray]
    out_dtype: type[np.generic]
    out_shape: tuple[int, ...]
    c_call: Callable[[], object]


def cases(rng: np.random.Generator, n: int) -> list[Case]:
    """The benchmarked ops on n elements."""
    x8 = rng.integers(-128, 128, n, dtype=np.int8)
    y8 = rng.integers(-128, 128, n, dtype=np.int8)
    x16 = rng.integers(-32768, 32768, n, dtype=np.int16)
    xf = (rng.standard_normal(n) * 3).astype(np.float32)
    h = n // 2
    a8, b8 = x8[:h].reshape(1, h).copy(), y8[:h].reshape(1, h).copy()
    return [
        Case("iqAdd", "iqAdd", {"scale_x": 128.0, "scale_y": 16.0, "scale_o": 16.0}, [x8, y8], np.int8, (n,),
             lambda: _C.linger_binary("add", x8, y8, 128.0, 16.0, 16.0)),
        Case("iqMul", "iqMul", {"scale_x": 64.0, "scale_y": 256.0, "scale_o": 128.0}, [x8, y8], np.int8, (n,),
             lambda: _C.linger_binary("mul", x8, y8, 64.0, 256.0, 128.0)),
        Case("iqCat", "iqCat", {"scale_x_0": 64.0, "scale_x_1": 16.0, "scale_o": 16.0, "dim": 1}, [a8, b8], np.int8,
             (1, 2 * h), lambda: _C.linger_iqcat([a8, b8], [64.0, 16.0], 16.0, 1)),
        Case("Requant 8->16", "Requant", {"data_bits": 8, "o_bits": 16, "scale_x": 32.0, "scale_o": 8192.0}, [x8],
             np.int16, (n,), lambda: _C.linger_requant(x8, 32.0, 8192.0, 16)),
        Case("Requant 16->8", "Requant", {"data_bits": 16, "o_bits": 8, "scale_x": 8192.0, "scale_o": 32.0}, [x16],
             np.int8, (n,), lambda: _C.linger_requant(x16, 8192.0, 32.0, 8)),
        Case("Quant", "Quant", {"data_bits": 8, "scale_x": 32.0}, [xf], np.int8, (n,),
             lambda: _C.linger_quant(xf, 32.0, 8)),
        Case("Dequant", "Dequant", {"scale_o": 32.0}, [x8], np.float32, (n,), lambda: _C.linger_dequant(x8, 32.0)),
    ]  # fmt: skip


def session_runner(case: Case, threads: int) -> tuple[Callable[[], None], np.ndarray]:
    """A no-argument function running the case's one-node model with IOBinding, and its output buffer."""
    names = [f"x{i}" for i in range(len(case.inputs))]
    node = helper.make_node(case.op, names, ["y"], domain="thinker", **case.attrs)
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info(nm, NP_TO_ONNX[a.dtype], list(a.shape)) for nm, a in zip(names, case.inputs,
                                                                                                 strict=True)],
        [helper.make_tensor_value_info("y", NP_TO_ONNX[np.dtype(case.out_dtype)], list(case.out_shape))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("thinker", 1)])
    model.ir_version = IR_VERSION
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ortquant.InferenceSession(model, sess_options=so)
    y = np.empty(case.out_shape, case.out_dtype)
    binding = sess.io_binding()
    values = [ort.OrtValue.ortvalue_from_numpy(a) for a in case.inputs]  # wraps the arrays, no copy
    for nm, v in zip(names, values, strict=True):
        binding.bind_ortvalue_input(nm, v)
    binding.bind_output("y", "cpu", 0, case.out_dtype, list(y.shape), y.ctypes.data)
    run = lambda: sess.run_with_iobinding(binding)  # noqa: E731
    run.keep_alive = values  # type: ignore[attr-defined]
    return run, y


def timed(fn: Callable[[], object], inner: int) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(fns: list[Callable[[], object]], samples: int, inner: int) -> list[tuple[float, float]]:
    """(median, minimum) microseconds per call of each function, sampled alternately after a warm-up."""
    for fn in fns:
        timed(fn, inner)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for t, fn in zip(times, fns, strict=True):
            t.append(timed(fn, inner))
    return [(statistics.median(t) * 1e6, min(t) * 1e6) for t in times]


def main() -> int:
    """Runs the benchmark and prints one table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=11, help="timed samples per figure (median reported)")
    ap.add_argument("--quick", action="store_true", help="64K elements, 3 samples (a smoke test)")
    args = ap.parse_args()
    n = 64 * 1024 if args.quick else N
    samples = 3 if args.quick else args.samples
    inner = 3 if args.quick else 5
    rng = np.random.default_rng(0)
    print(
        f"onnxruntime {ort.__version__}, ortquant {ortquant.__version__}, detected ISA {kernels.detected_isa()}, "
        f"{os.cpu_count()} CPUs, load " + " ".join(f"{v:.1f}" for v in os.getloadavg())
    )
    print(
        f"{n} elements; median of {samples} samples; ratio = op time / memcpy time of the same traffic (<= 1.5: "
        "goal); 'min ratio' compares the fastest samples (least disturbed by other load)"
    )
    det = kernels.detected_isa()
    isas = ["scalar"] + (["avx2"] if det != "scalar" else []) + (["avx512"] if det.startswith("avx512") else [])
    head = (
        f"{'op':15s} {'MB moved':>8s} {'memcpy us':>9s} {'ORT 1t us':>9s} {'ratio':>5s} {'min ratio':>9s} "
        f"{'ORT 2t us':>9s} {'ratio':>5s}"
    )
    print(head + "".join(f" {'_C ' + i:>10s}" for i in isas))
    worst = 0.0
    for case in cases(rng, n):
        moved = sum(a.nbytes for a in case.inputs) + int(np.prod(case.out_shape)) * np.dtype(case.out_dtype).itemsize
        src = np.ones(moved // 2, np.uint8)
        dst = np.empty_like(src)
        run1, out1 = session_runner(case, 1)  # keep the bound output buffers alive
        run2, out2 = session_runner(case, 2)

        def copy(dst: np.ndarray = dst, src: np.ndarray = src) -> None:
            np.copyto(dst, src)

        (copy_us, copy_min), (t1, t1_min), (t2, _) = compare([copy, run1, run2], samples, inner)
        per_isa = []
        for isa in isas:
            kernels.set_isa(isa)
            per_isa.append(compare([case.c_call], samples, inner)[0][0])
        kernels.set_isa("")
        assert np.array_equal(out1, out2) and np.array_equal(out1.reshape(-1), np.asarray(case.c_call()).reshape(-1))
        worst = max(worst, t1_min / copy_min)
        print(
            f"{case.name:15s} {moved / 1e6:8.1f} {copy_us:9.0f} {t1:9.0f} {t1 / copy_us:5.2f} {t1_min / copy_min:9.2f} "
            f"{t2:9.0f} {t2 / copy_us:5.2f}" + "".join(f" {v:10.0f}" for v in per_isa)
        )
    print(f"worst single-thread min ratio: {worst:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
