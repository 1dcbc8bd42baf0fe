"""A/B latency of two builds of the custom-op library (e.g. before and after a change) on the same models.

Usage::

    PYTHONPATH=python .venv/bin/python bench/bench_ab.py A.so B.so [--rounds 21] [--only REGEX] [--quick]

For every model, two plain onnxruntime sessions are created (``register_custom_ops_library``, one intra-op thread,
``ORT_ENABLE_ALL``), one per library, from the *same* serialized model, and their outputs must be bit-identical.
Then the two sessions are timed interleaved: ``--rounds`` rounds, each of which times one batch of runs of A and one
of B (order A,B in even rounds and B,A in odd ones). A batch is at least ``--runs`` calls and lasts at least
``--round-ms``; the round's figure for a side is the median call of its batch. Per model the table gives the
median over rounds of each side, the median of the per-round ratios B/A (paired, so load that changes between
rounds cancels) and their interquartile range, and in how many rounds B was slower than A.

Models:

- every linger conformance case ``tests/data/linger/*.onnx`` with its inputs from the ``.npz`` (``x0, x1, ...`` in
  graph-input order);
- the same kind of cases with larger inputs (``LARGE`` below: input shapes changed, value_info and output shapes
  cleared), so that kernel time and not only per-call overhead is measured;
- the QONNX models ``models/*.onnx`` at batch 1 and 32, random inputs from a fixed seed;
- the single-op workloads of BENCHMARKS.md, built by the other bench scripts' own model builders (names start with
  ``bm:``): QONNX Quant (bench_quant), the linger elementwise ops on 4M elements (bench_linger_elementwise),
  LSTMInt/GRUInt T=100 (bench_rnn), LinearInt (bench_gemm), Conv2dInt/Conv1dInt (bench_conv) and
  ConvTranspose2dInt (bench_convtranspose) at batch 1, weights in [-127, 127] as those scripts draw them by default,
  and the GEMM/conv shapes once more with weights in [-128, 127] (``w-128``: the AVX2 kernels' -128 path,
  ``TileArgs::xneg``).

Each model goes through ``ortquant.prepare_model`` of the package on ``PYTHONPATH`` first, and both libraries get
that prepared model. If A or B cannot load it, both get the file as it is on disk instead (the row says ``raw``).
Without the two library paths (as ``make bench`` / ``bench/run_all.py`` call every script) nothing is measured.

``--integer``: integer mode instead (``prepare_model(..., integer=True)`` for both libraries): only the QONNX models
``models/*.onnx``, at batch 1 and 8. ``--cpu``: time each call's CPU time (``time.process_time_ns``) instead of its
wall time, for a loaded machine.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import ortquant

ROOT = Path(__file__).resolve().parents[1]
LINGER = ROOT / "tests" / "data" / "linger"
QONNX = ROOT / "models"
QONNX_BATCHES = (1, 32)
INTEGER_BATCHES = (1, 8)
GROUPS = ("linger", "large", "qonnx", "benchmarks")

# Linger cases re-run with larger inputs: case -> new shape of each graph input (graph-input order). Inputs are
# random (fixed seed), quantized by the model's own thinker::Quant, so every int8 value occurs.
LARGE: dict[str, list[tuple[int, ...]]] = {
    "conv2d_dil_nobias": [(8, 3, 64, 64)],
    "conv2d_group_s2": [(8, 4, 64, 64)],
    "conv2d_depthwise_k1": [(8, 3, 64, 64)],
    "conv2d_k5_s4_obits16": [(8, 2, 65, 65)],
    "conv_bn": [(8, 3, 64, 64)],
    "conv1d": [(32, 4, 512)],
    "convtranspose_k4_nobias": [(8, 4, 32, 32)],
    "maxpool_int8": [(8, 3, 63, 63)],
    "avgpool_k2s2": [(8, 3, 64, 64)],
    "linear_2d": [(4096, 9)],
    "linear_3d_nobias": [(64, 64, 6)],
    "bmm": [(64, 48, 5), (64, 96, 5)],
    "lstm_bf": [(32, 64, 5)],
    "lstm_tf_bidir": [(64, 32, 4)],
    "gru_tf": [(64, 32, 5)],
    "iqadd": [(64, 64, 48), (64, 64, 48)],
    "iqmul": [(64, 64, 48), (64, 64, 48)],
    "iqsigmoid": [(4096, 8)],
    "softmax": [(64, 64, 6)],
}


@dataclass
class Case:
    """One model to time: a name, the model as both libraries get it, and its inputs."""

    name: str
    model: onnx.ModelProto
    raw: onnx.ModelProto
    feeds: list[np.ndarray]


@dataclass
class Result:
    """The timings of one case (ms per call, one figure per round and side) or why there are none."""

    name: str
    note: str
    a_ms: list[float]
    b_ms: list[float]
    runs: int

    @property
    def ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.a_ms, self.b_ms, strict=True)]


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _resize_inputs(model: onnx.ModelProto, shapes: Sequence[tuple[int, ...]]) -> onnx.ModelProto:
    """A copy of ``model`` with new graph-input shapes; value_info and output shapes are cleared (re-inferred)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for vi, shape in zip(_graph_inputs(out), shapes, strict=True):
        dims = vi.type.tensor_type.shape.dim
        del dims[:]
        for d in shape:
            dims.add().dim_value = d
    del out.graph.value_info[:]
    for vi in out.graph.output:
        vi.type.tensor_type.ClearField("shape")
    return out


def _set_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs have ``batch`` as first dimension (models with a symbolic batch)."""
    shapes = []
    for vi in _graph_inputs(model):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        shapes.append((batch, *dims[1:]))
    return _resize_inputs(model, shapes)


def _random_feed(vi: onnx.ValueInfoProto, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    raise ValueError(f"no random input for {vi.name} of type {dtype}")


def _proto(model: bytes | onnx.ModelProto) -> onnx.ModelProto:
    return model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)


def benchmark_workloads(rng: np.random.Generator) -> list[tuple[str, onnx.ModelProto, list[np.ndarray]]]:
    """The single-op models of BENCHMARKS.md (batch 1, one thread), from the bench scripts' builders."""
    import bench_conv
    import bench_convtranspose
    import bench_gemm
    import bench_linger_elementwise
    import bench_quant
    import bench_rnn
    from onnx import helper

    out: list[tuple[str, onnx.ModelProto, list[np.ndarray]]] = []
    for shape in (bench_quant.SMALL, bench_quant.BIG):
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        per_channel = rng.uniform(0.01, 0.1, (1, shape[1], 1, 1)).astype(np.float32)
        dims = "x".join(map(str, shape))
        for what, scale in (("per-tensor", np.float32(0.05)), ("per-channel", per_channel)):
            out.append((f"bm: QONNX Quant {what} {dims}", _proto(bench_quant.quant_model(shape, scale)), [x]))
    for c in bench_linger_elementwise.cases(rng, bench_linger_elementwise.N):
        names = [f"x{i}" for i in range(len(c.inputs))]
        to_onnx = bench_linger_elementwise.NP_TO_ONNX
        pairs = zip(names, c.inputs, strict=True)
        graph = helper.make_graph(
            [helper.make_node(c.op, names, ["y"], domain="thinker", **c.attrs)],
            "bench",
            [helper.make_tensor_value_info(n, to_onnx[a.dtype], list(a.shape)) for n, a in pairs],
            [helper.make_tensor_value_info("y", to_onnx[np.dtype(c.out_dtype)], list(c.out_shape))],
        )
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("thinker", 1)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = bench_linger_elementwise.IR_VERSION
        out.append((f"bm: {c.name} 4M", model, list(c.inputs)))
    for lstm in (True, False):
        for b in (1, 8):
            for h in (128, 256):
                x8 = rng.integers(-128, 128, (100, b, h)).astype(np.int8)
                model = bench_rnn.int_model(lstm, 100, b, h, h, rng)
                out.append((f"bm: {'LSTMInt' if lstm else 'GRUInt'} T100 B{b} H{h}", model, [x8]))
    for lo in (-127, -128):
        tag = "" if lo == -127 else " w-128"
        for m, k, n in bench_gemm.SHAPES:
            a = rng.integers(-128, 128, (m, k), dtype=np.int8)
            w = rng.integers(lo, 128, (n, k), dtype=np.int8)
            bias = rng.integers(-(2**16), 2**16, n).astype(np.int32)
            model = _proto(bench_gemm.linear_int(a, w, bias, 8, 2.0**-10))
            out.append((f"bm: LinearInt {m}x{k}x{n}{tag}", model, [a]))
        layers = {name: spec for name, *spec in (*bench_conv.GOAL_LAYERS, *bench_conv.LAYERS)}
        for name, (shape, m, k, stride, pad, group) in layers.items():
            rank = len(shape) - 1
            osp = [(d + 2 * pad - k) // stride + 1 for d in shape[1:]]
            x = rng.integers(-128, 128, (1, *shape), dtype=np.int8)
            wt = rng.integers(lo, 128, (m, shape[0] // group, *([k] * rank)), dtype=np.int8)
            bias = rng.integers(-(2**14), 2**14, m).astype(np.int32)
            y8 = np.empty((1, m, *osp), np.int8)
            model = _proto(bench_conv.conv2d_int(x, wt, bias, y8, bench_conv.conv_attrs(k, stride, pad, group, rank)))
            out.append((f"bm: conv {name}{tag}", model, [x]))
        for name, c_in, h, m, k, stride, pad, opad in bench_convtranspose.LAYERS:
            oh = (h - 1) * stride - 2 * pad + k + opad
            x = rng.integers(-128, 128, (1, c_in, h, h), dtype=np.int8)
            w = rng.integers(lo, 128, (c_in, m, k, k), dtype=np.int8)
            bias = rng.integers(-(2**14), 2**14, m).astype(np.int32)
            y8 = np.empty((1, m, oh, oh), np.int8)
            attrs = bench_convtranspose._convt_attrs(k, stride, pad, opad)
            model = _proto(bench_convtranspose.conv_transpose_int(x, w, bias, y8, attrs))
            out.append((f"bm: convT {name}{tag}", model, [x]))
    return out


def collect_cases(only: re.Pattern[str] | None, groups: set[str], integer: bool = False) -> list[Case]:
    """The models of the module docstring in ``groups``, prepared, with their inputs; ``only`` filters by name.

    ``integer``: the QONNX models only, prepared for integer mode, at the batches ``INTEGER_BATCHES``.
    """
    cases: list[Case] = []

    def add(name: str, raw: onnx.ModelProto, feeds: list[np.ndarray]) -> None:
        if only is not None and not only.search(name):
            return
        cases.append(Case(name, ortquant.prepare_model(raw, integer=integer), raw, feeds))

    if integer:
        groups = {"qonnx"}

    if "linger" in groups:
        for path in sorted(LINGER.glob("*.onnx")):
            raw = onnx.load(str(path))
            data = np.load(path.with_suffix(".npz"))
            add(path.stem, raw, [data[f"x{k}"] for k in range(len(_graph_inputs(raw)))])
    rng = np.random.default_rng(20261124)
    if "large" in groups:
        for case, shapes in LARGE.items():
            raw = _resize_inputs(onnx.load(str(LINGER / f"{case}.onnx")), shapes)
            feeds = [_random_feed(vi, s, rng) * 4.0 for vi, s in zip(_graph_inputs(raw), shapes, strict=True)]
            add(f"{case} {'+'.join('x'.join(map(str, s)) for s in shapes)}", raw, feeds)
    if "qonnx" in groups:
        for path in sorted(QONNX.glob("*.onnx")):
            for batch in INTEGER_BATCHES if integer else QONNX_BATCHES:
                raw = _set_batch(onnx.load(str(path)), batch)
                ins = _graph_inputs(raw)
                feeds = [_random_feed(vi, [d.dim_value for d in vi.type.tensor_type.shape.dim], rng) for vi in ins]
                add(f"{path.stem} b{batch}", raw, feeds)
    if "benchmarks" in groups:
        for name, raw, feeds in benchmark_workloads(np.random.default_rng(0)):
            add(name, raw, feeds)
    return cases


def _session(model: onnx.ModelProto, library: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.register_custom_ops_library(library)
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])


def _runner(sess: ort.InferenceSession, feeds: list[np.ndarray]) -> tuple[Callable[[], None], Callable[[], list]]:
    """A call that runs ``sess`` once and one that runs it and returns copies of its outputs.

    Inputs are bound once (the same numpy arrays for both libraries); outputs are bound to numpy buffers allocated
    here after a first run (onnxruntime's own allocation would place the two sessions' outputs differently in their
    arenas, which alone moves memory-bound ops by several percent).
    """
    binding = sess.io_binding()
    values = [ort.OrtValue.ortvalue_from_numpy(x) for x in feeds]  # wraps the arrays, no copy
    for vi, v in zip(sess.get_inputs(), values, strict=True):
        binding.bind_ortvalue_input(vi.name, v)
    names = [vi.name for vi in sess.get_outputs()]
    for name in names:
        binding.bind_output(name)
    sess.run_with_iobinding(binding)
    buffers = [np.empty_like(y) for y in binding.copy_outputs_to_cpu()]
    binding.clear_binding_outputs()
    for name, y in zip(names, buffers, strict=True):
        binding.bind_output(name, "cpu", 0, y.dtype.type, list(y.shape), y.ctypes.data)

    def run() -> None:
        sess.run_with_iobinding(binding)

    def outputs() -> list:
        run()
        return [y.copy() for y in buffers]

    run.keep_alive = (values, buffers)  # type: ignore[attr-defined]
    return run, outputs


def _identical(xs: list, ys: list) -> bool:
    """Same number of outputs, each of the same dtype and shape and the same bytes (NaN payloads, signed zeros)."""
    if len(xs) != len(ys):
        return False
    pairs = zip(xs, ys, strict=True)
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in pairs)


CLOCK: list[Callable[[], int]] = [time.perf_counter_ns]  # --cpu: time.process_time_ns


def _batch_ms(run: Callable[[], None], n: int) -> float:
    """Median time (``CLOCK``: wall, or CPU with --cpu) of ``n`` calls of ``run``, in ms."""
    times = []
    clock = CLOCK[0]
    for _ in range(n):
        t0 = clock()
        run()
        times.append(clock() - t0)
    return statistics.median(times) / 1e6


def time_case(case: Case, lib_a: str, lib_b: str, rounds: int, min_runs: int, round_ms: float) -> Result:
    """Sessions for both libraries, the output check, then ``rounds`` interleaved rounds (see module docstring)."""
    note = ""
    try:
        sa, sb = _session(case.model, lib_a), _session(case.model, lib_b)
    except Exception as e:  # any load failure: fall back to the file as it is
        if case.raw is case.model:
            return Result(case.name, f"does not load: {str(e).splitlines()[0][:100]}", [], [], 0)
        try:
            sa, sb = _session(case.raw, lib_a), _session(case.raw, lib_b)
        except Exception as e2:
            return Result(case.name, f"does not load, nor raw: {str(e2).splitlines()[0][:100]}", [], [], 0)
        note = "raw"
    run_a, out_a = _runner(sa, case.feeds)
    run_b, out_b = _runner(sb, case.feeds)
    if not _identical(out_a(), out_b()):
        return Result(case.name, "OUTPUTS DIFFER", [], [], 0)
    warm_end = time.perf_counter() + 0.1
    calls = 0
    while time.perf_counter() < warm_end or calls < 5:
        run_a()
        run_b()
        calls += 1
    per_call = min(_batch_ms(run_a, 5), _batch_ms(run_b, 5))
    runs = max(min_runs, min(5000, int(round_ms / max(per_call, 1e-6)) + 1))
    a_ms: list[float] = []
    b_ms: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            if r % 2 == 0:
                a_ms.append(_batch_ms(run_a, runs))
                b_ms.append(_batch_ms(run_b, runs))
            else:
                b_ms.append(_batch_ms(run_b, runs))
                a_ms.append(_batch_ms(run_a, runs))
    finally:
        gc.enable()
    return Result(case.name, note, a_ms, b_ms, runs)


def _quartiles(xs: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def print_row(res: Result, threshold: float) -> None:
    """One markdown table row; ``*`` marks a median ratio above ``threshold``."""
    if not res.a_ms:
        print(f"| {res.name} | | | | | | {res.note} |", flush=True)
        return
    ratio = statistics.median(res.ratios)
    lo, hi = _quartiles(res.ratios)
    slower = sum(r > 1.0 for r in res.ratios)
    mark = " *" if ratio > threshold else ""
    print(
        f"| {res.name} | {statistics.median(res.a_ms):.4f} | {statistics.median(res.b_ms):.4f} | "
        f"{ratio:.3f}{mark} | {lo:.3f}-{hi:.3f} | {slower}/{len(res.ratios)} | {res.runs} {res.note} |",
        flush=True,
    )


def summarize(results: list[Result], threshold: float) -> None:
    """Median of the per-model ratios, the slowest and fastest models, and the models above ``threshold``."""
    timed = [r for r in results if r.a_ms]
    if not timed:
        return
    med = {r.name: statistics.median(r.ratios) for r in timed}
    ordered = sorted(med, key=med.__getitem__)
    print(f"\n{len(timed)} models timed, {len(results) - len(timed)} not.")
    print(f"median of the per-model ratios B/A: {statistics.median(med.values()):.3f}")
    print("B fastest relative to A: " + ", ".join(f"{n} {med[n]:.3f}" for n in ordered[:5]))
    print("B slowest relative to A: " + ", ".join(f"{n} {med[n]:.3f}" for n in reversed(ordered[-5:])))
    over = [n for n in reversed(ordered) if med[n] > threshold]
    print(f"above {threshold:.2f}: " + (", ".join(over) if over else "none"))
    if over:
        print("rerun those with: --only '^(" + "|".join(re.escape(n) for n in over) + ")$'")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("lib_a", nargs="?", help="custom-op library A (e.g. the build before a change)")
    p.add_argument("lib_b", nargs="?", help="custom-op library B (e.g. the build after it)")
    p.add_argument("--rounds", type=int, default=21, help="interleaved rounds per model (default 21)")
    p.add_argument("--runs", type=int, default=20, help="minimum calls per side and round (default 20)")
    p.add_argument("--round-ms", type=float, default=20.0, help="minimum duration of one side's batch (default 20)")
    p.add_argument("--only", help="regular expression: time only the models whose name it matches")
    p.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}")
    p.add_argument("--threshold", type=float, default=1.05, help="ratio B/A above which a row is marked (1.05)")
    p.add_argument("--quick", action="store_true", help="5 rounds of 5 ms (a smoke run)")
    p.add_argument("--integer", action="store_true", help="integer mode: models/*.onnx prepared with integer=True")
    p.add_argument("--cpu", action="store_true", help="time CPU time per call instead of wall time")
    args = p.parse_args(argv)
    if args.lib_a is None or args.lib_b is None:
        print("bench_ab.py needs two library paths (A.so B.so); nothing to measure")
        return 0
    if args.quick:
        args.rounds, args.round_ms = 5, 5.0
    for lib in (args.lib_a, args.lib_b):
        if not Path(lib).is_file():
            print(f"no such file: {lib}")
            return 2
    only = re.compile(args.only) if args.only else None
    print(f"A = {args.lib_a}\nB = {args.lib_b}")
    print(f"onnxruntime {ort.__version__}, models prepared by ortquant {ortquant.__version__} at {ortquant.__file__}")
    print(f"{args.rounds} rounds per model, each >= {args.runs} calls and >= {args.round_ms:g} ms per side")
    groups = set(args.groups.split(","))
    if not groups <= set(GROUPS):
        print(f"unknown group in {args.groups!r}; the groups are {','.join(GROUPS)}")
        return 2
    if args.cpu:
        CLOCK[0] = time.process_time_ns
    print(f"mode: {'integer' if args.integer else 'default'}, clock: {'CPU' if args.cpu else 'wall'}")
    cases = collect_cases(only, groups, integer=args.integer)
    print("\n| model | A ms | B ms | B/A | B/A IQR | rounds B slower | calls/round |")
    print("|---|---|---|---|---|---|---|")
    results = []
    for case in cases:
        res = time_case(case, args.lib_a, args.lib_b, args.rounds, args.runs, args.round_ms)
        print_row(res, args.threshold)
        results.append(res)
    summarize(results, args.threshold)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
