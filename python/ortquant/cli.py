"""The ``ortquant`` command line: run, check and benchmark models with ortquant's ops.

ortquant run MODEL [--input name=file.npy ...] [--random] [--threads N]
ortquant check MODEL
ortquant bench MODEL [--runs N] [--warmup N] [--batch N] [--qonnx]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

_STANDARD_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training"}

# Ops ortquant knows but deliberately does not run, with the reason `check` gives.
_NOT_SUPPORTED = {
    "GenericPartition": "GenericPartition is not supported: it executes another model file named by an attribute",
    "LayerNormInt": "LayerNormInt is not supported: linger 1.1.1 itself cannot run it (no reference semantics)",
}

# `--integer` of run/check/bench (issue 10). The `prepare IN OUT` subcommand (issue 8) takes the same flag and passes
# it on: prepare_model(model, exact=args.exact, integer=args.integer).
_INTEGER_HELP = "integer mode: quantized Conv/MatMul/Gemm layers on the int8 engine (docs/ops.md)"

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
}


def _session(model: onnx.ModelProto, threads: int, integer: bool = False) -> Any:
    import onnxruntime as ort

    import ortquant

    so = ort.SessionOptions()
    if threads > 0:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ortquant.InferenceSession(model, sess_options=so, integer=integer)


def _random_inputs(sess: Any, batch: int | None, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        dtype = _ORT_TYPES.get(i.type)
        if dtype is None:
            raise SystemExit(f"input {i.name}: type {i.type} is not supported by --random")
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if batch is not None and shape:
            shape[0] = batch
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype is np.bool_:
            feeds[i.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            info = np.iinfo(dtype)
            feeds[i.name] = rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)
    return feeds


def _parse_inputs(specs: Sequence[str]) -> dict[str, np.ndarray]:
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"--input expects name=file.npy, got {spec!r}")
        feeds[name] = np.load(path)
    return feeds


def _fmt_array(a: np.ndarray) -> str:
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        return f"{a.dtype} {list(a.shape)}\n{a}"


def cmd_run(args: argparse.Namespace) -> int:
    model = onnx.load(args.model)
    sess = _session(model, args.threads, integer=args.integer)
    feeds = _parse_inputs(args.input)
    missing = [i.name for i in sess.get_inputs() if i.name not in feeds]
    if missing:
        if not args.random:
            raise SystemExit(f"missing inputs {missing}: pass --input name=file.npy or --random")
        rnd = _random_inputs(sess, None)
        feeds.update({k: rnd[k] for k in missing})
    t0 = time.perf_counter()
    outputs = sess.run(None, feeds)
    dt = time.perf_counter() - t0
    for meta, value in zip(sess.get_outputs(), outputs, strict=True):
        print(f"{meta.name}: {_fmt_array(np.asarray(value))}")
    print(f"latency: {dt * 1e3:.3f} ms (first run, includes warm-up)")
    return 0


def check_model(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, bool, str]]:
    """For every node outside the standard ONNX domains: (node, supported, reason)."""
    import ortquant
    from ortquant._session import check_trunc_versions

    supported = ortquant.supported_ops()
    trunc_problems = {p.split("'")[1]: p for p in check_trunc_versions(model)}
    rows = []
    for node in model.graph.node:
        if node.domain in _STANDARD_DOMAINS:
            continue
        key = (node.domain, node.op_type)
        if key not in supported and node.op_type in _NOT_SUPPORTED:
            rows.append((node, False, _NOT_SUPPORTED[node.op_type]))
        elif key not in supported:
            domains = sorted({d for d, o in supported if o == node.op_type})
            why = f"no ortquant kernel for {node.domain}::{node.op_type}"
            if domains:
                why += f" (available in {', '.join(domains)})"
            rows.append((node, False, why))
        elif node.name in trunc_problems:
            rows.append((node, False, trunc_problems[node.name]))
        else:
            rows.append((node, True, "native kernel"))
    return rows


def print_integer_plan(model: onnx.ModelProto) -> None:
    """Integer mode's decision per Conv / MatMul / Gemm layer: the path it takes and why."""
    from ortquant.transforms.lower_integer import integer_plan

    plan = integer_plan(model)
    if not plan:
        print("integer mode: no Conv / MatMul / Gemm layers")
        return
    width = max(len(d.node) for d in plan)
    for d in plan:
        print(f"{'int  ' if d.integer else 'float'} {d.node:<{width}}  {d.op_type:<6}  {d.reason}")
    n = sum(d.integer for d in plan)
    print(f"integer mode: {n} of {len(plan)} layer(s) on the integer path")


def cmd_check(args: argparse.Namespace) -> int:
    model = onnx.load(args.model)
    if args.integer:
        print_integer_plan(model)
    rows = check_model(model)
    if not rows:
        print("no custom-domain nodes: the model runs in stock onnxruntime")
    width = max((len(n.name or n.op_type) for n, _, _ in rows), default=0)
    for node, ok, why in rows:
        print(f"{'ok ' if ok else 'NO '} {(node.name or '<unnamed>'):<{width}}  {node.domain}::{node.op_type}  {why}")
    bad = sum(not ok for _, ok, _ in rows)
    if bad == 0:
        # Nodes are supported by name; creating a session validates attributes and types too.
        try:
            _session(model, 1, integer=args.integer)
        except Exception as e:
            print(f"session creation fails: {e}")
            return 1
        print(f"{len(rows)} custom node(s), all supported; the session loads")
        return 0
    print(f"{bad} of {len(rows)} custom node(s) not supported")
    return 1


def _progress(i: int, n: int, label: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    done = int(width * i / n)
    sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {i}/{n}")
    if i == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _time_runs(fn: Any, runs: int, warmup: int, label: str) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        _progress(i + 1, runs, label)
    return times


def _summary(times: list[float]) -> str:
    ms = sorted(t * 1e3 for t in times)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"median {statistics.median(ms):.3f} ms, min {ms[0]:.3f} ms, p90 {p90:.3f} ms over {len(ms)} runs"


def cmd_bench(args: argparse.Namespace) -> int:
    model = onnx.load(args.model)
    sess = _session(model, args.threads, integer=args.integer)
    feeds = _random_inputs(sess, args.batch)
    ours = _time_runs(lambda: sess.run(None, feeds), args.runs, args.warmup, "ortquant")
    print(f"ortquant + onnxruntime: {_summary(ours)}")
    if args.qonnx:
        try:
            from qonnx.core.modelwrapper import ModelWrapper
            from qonnx.core.onnx_exec import execute_onnx
        except ImportError:
            print("qonnx is not installed: pip install qonnx")
            return 1
        wrapper = ModelWrapper(model)
        runs = max(1, min(args.runs, args.qonnx_runs))
        theirs = _time_runs(lambda: execute_onnx(wrapper, feeds), runs, 1, "qonnx   ")
        print(f"qonnx execute_onnx:     {_summary(theirs)}")
        print(f"speedup: {statistics.median(theirs) / statistics.median(ours):.1f}x")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ortquant`` command."""
    parser = argparse.ArgumentParser(prog="ortquant", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a model once and print its outputs and latency")
    p.add_argument("model", type=Path)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--random", action="store_true", help="random values for inputs not given")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime's default)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="list custom nodes: supported or not, and why")
    p.add_argument("model", type=Path)
    p.add_argument("--integer", action="store_true", help="also say per layer whether integer mode runs it, and why")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("bench", help="latency over many runs (optionally against qonnx's executor)")
    p.add_argument("model", type=Path)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=None, help="batch size for the first input dim")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--qonnx", action="store_true", help="also time qonnx's execute_onnx")
    p.add_argument("--qonnx-runs", type=int, default=10, help="at most this many qonnx runs (it is slow)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
