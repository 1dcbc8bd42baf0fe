"""Per-session cost of ortquant.prepare_model (the transform pipeline) on a model, as a ratio to onnxruntime's own
session creation for the same model.

    PYTHONPATH=python .venv/bin/python bench/bench_prepare.py [MODEL ...]     (default: the largest in models/)
    PYTHONPATH=python .venv/bin/python bench/bench_prepare.py --integer [MODEL ...] (default: the public models)

Prints the median over 30 runs of what ortquant.InferenceSession(path) adds per session (onnx.load without
external data, then the pipeline on the ModelProto), and of creating an onnxruntime.InferenceSession (ortquant
registered) from the path, 10 runs.

``--integer``: the whole session creation ``ortquant.InferenceSession(path, integer=True)`` against
``ortquant.InferenceSession(path)``, process CPU time, one intra-op thread, the two alternating, median of 7 each,
with the kept weight-quantizer results forgotten before every creation (each is a first session); one line per
model, sorted by the ratio integer / default, worst first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import onnx
import onnxruntime as ort

import ortquant
from ortquant.transforms import PrepareOptions, apply_pipeline


def _median_ms(fn, runs: int = 30) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_one(path: str) -> str:
    """One line of figures for the model at ``path``."""
    model = onnx.load(path)
    so = ort.SessionOptions()
    ortquant.register(so)
    load = _median_ms(lambda: onnx.load(path, load_external_data=False))
    pipe = _median_ms(lambda: apply_pipeline(model, PrepareOptions()))
    sess = _median_ms(lambda: ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), runs=10)
    _, changed = apply_pipeline(model, PrepareOptions())
    return (
        f"{Path(path).name} ({Path(path).stat().st_size / 1024:.0f} KiB, {len(model.graph.node)} nodes): "
        f"load {load:.2f} ms + pipeline {pipe:.2f} ms = {(load + pipe):.2f} ms per session; "
        f"onnxruntime session creation {sess:.1f} ms (ratio {(load + pipe) / sess:.3f}); "
        f"rewrites: {', '.join(changed) or 'none'}"
    )


def integer_ratio(path: str, runs: int = 7) -> tuple[float, float]:
    """Median CPU seconds of a first ``ortquant.InferenceSession`` of ``path`` in default and in integer mode."""
    import importlib

    fold = importlib.import_module("ortquant.transforms.fold_weight_quantizers")
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):
        for integer in (False, True):
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            fold.clear_cache()
            t0 = time.process_time()
            ortquant.InferenceSession(path, sess_options=so, integer=integer)
            times[integer].append(time.process_time() - t0)
    return statistics.median(times[False]), statistics.median(times[True])


def main_integer(paths: list[str]) -> None:
    if not paths:
        corpus = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "realworld"
        paths = [str(p) for p in sorted(corpus.glob("*.onnx"))]
    rows = []
    for path in paths:
        default, integer = integer_ratio(path)
        rows.append((integer / default, Path(path).name, default, integer))
    for ratio, name, default, integer in sorted(rows, reverse=True):
        print(f"{name}: default {default * 1e3:.1f} ms, integer {integer * 1e3:.1f} ms, ratio {ratio:.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="ONNX files (default: see above)")
    parser.add_argument("--integer", action="store_true", help="integer-mode session creation against default mode")
    args = parser.parse_args(argv)
    missing = [p for p in args.models if not Path(p).is_file()]
    if missing:
        print(f"bench_prepare.py: no such model file: {missing[0]}", file=sys.stderr)
        return 2
    if args.integer:
        main_integer(args.models)
        return 0
    paths = args.models
    if not paths:
        models = Path(__file__).resolve().parents[1].joinpath("models").glob("*.onnx")
        paths = [str(max(models, key=lambda p: p.stat().st_size))]
    for path in paths:
        print(bench_one(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
