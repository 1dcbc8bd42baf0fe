"""The ``ortquant`` command line: run, check and benchmark models with ortquant's ops.

ortquant run MODEL [--input name=file.npy ...] [--random] [--threads N]
ortquant check MODEL [--exact]
ortquant prepare IN.onnx OUT.onnx [--exact]
ortquant bench MODEL [--runs N] [--warmup N] [--batch N] [--qonnx] [--json FILE] [--no-progress]
"""

from __future__ import annotations

import argparse
import json
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

# `--integer` of run/check/prepare/bench: integer mode (prepare_model(model, integer=True)).
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


def _node_key(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else "<unnamed>")


def describe_changes(before: onnx.ModelProto, after: onnx.ModelProto) -> list[str]:
    """What one transform did, node by node: moved (domain/op changed), replaced, added; declared types changed."""
    old = {_node_key(n): n for n in before.graph.node}
    new = {_node_key(n): n for n in after.graph.node}
    lines = []
    for key, n in new.items():
        o = old.get(key)
        if o is None:
            lines.append(f"added {n.domain or 'ai.onnx'}::{n.op_type} '{key}'")
        elif (o.domain, o.op_type) != (n.domain, n.op_type):
            lines.append(f"'{key}': {o.domain or 'ai.onnx'}::{o.op_type} -> {n.domain or 'ai.onnx'}::{n.op_type}")
        elif list(o.input) != list(n.input) or o.attribute != n.attribute:
            lines.append(f"'{key}': {n.domain or 'ai.onnx'}::{n.op_type} rewritten")
    for key, o in old.items():
        if key not in new:
            lines.append(f"removed {o.domain or 'ai.onnx'}::{o.op_type} '{key}'")
    types_before = {v.name: v.type.tensor_type.elem_type for v in [*before.graph.value_info, *before.graph.output]}
    types_after = {v.name: v.type.tensor_type.elem_type for v in [*after.graph.value_info, *after.graph.output]}
    for name, t in types_before.items():
        if name not in types_after:
            lines.append(f"value '{name}': declared {onnx.TensorProto.DataType.Name(t)} dropped (contradicts the op)")
        elif types_after[name] != t:
            lines.append(
                f"value '{name}': declared {onnx.TensorProto.DataType.Name(t)} -> "
                f"{onnx.TensorProto.DataType.Name(types_after[name])}"
            )
    added_imports = {i.domain for i in after.opset_import} - {i.domain for i in before.opset_import}
    for d in sorted(added_imports):
        lines.append(f"opset import added for domain '{d}'")
    return lines


def _failing_nodes(message: str, model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Nodes of ``model`` that an onnxruntime error message names (by node name or output name)."""
    hits = []
    for node in model.graph.node:
        names = [node.name] if node.name else []
        names += [o for o in node.output if o]
        if any(f"({n})" in message or f"'{n}'" in message or f" {n} " in message for n in names):
            hits.append(node)
    return hits


def _short(message: str, limit: int = 220) -> str:
    """The informative tail of an onnxruntime error (its messages start with the source location)."""
    text = " ".join(message.split())
    for marker in (" was false. ", "] "):
        if marker in text:
            text = text.split(marker)[-1] if marker == "] " else text.split(marker, 1)[1]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def isolate_failing_nodes(model: onnx.ModelProto, max_nodes: int = 2000) -> list[tuple[onnx.NodeProto, str]]:
    """Each top-level node of ``model`` in a one-node session (inferred input types, its initializers); the nodes
    whose session creation fails, with onnxruntime's message. Used when onnxruntime's error names no node."""
    import onnxruntime as ort

    import ortquant

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    except Exception:
        inferred = model.graph
    infos = {v.name: v for v in [*inferred.input, *inferred.value_info, *inferred.output]}
    inits = {t.name: t for t in model.graph.initializer}
    failures = []
    for node in list(model.graph.node)[:max_nodes]:
        used_inits = [inits[i] for i in node.input if i in inits]
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in used_inits):
            continue
        inputs = [infos[i] for i in dict.fromkeys(node.input) if i and i not in inits and i in infos]
        if len(inputs) != len([i for i in dict.fromkeys(node.input) if i and i not in inits]):
            continue  # an input whose type is unknown: cannot be tried alone
        outputs = [infos.get(o) or onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = onnx.helper.make_graph([node], "one_node", inputs, outputs, used_inits)
        one = onnx.helper.make_model(graph, opset_imports=list(model.opset_import))
        one.ir_version = model.ir_version or 10
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ortquant.register(so)
        try:
            ort.InferenceSession(one.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except Exception as e:
            failures.append((node, _short(str(e))))
    return failures


def cmd_check(args: argparse.Namespace) -> int:
    """Report what ortquant does with a model: the rewrites, every custom node, and the real session creation."""
    from ortquant.transforms import PIPELINE, ModelError, PrepareOptions

    model = onnx.load(args.model, load_external_data=False)
    try:
        options = PrepareOptions(exact=args.exact, integer=args.integer)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    prepared = model
    failed = False
    for step in PIPELINE:
        if not step.when(options):
            continue
        if step.name == "lower_integer":
            print_integer_plan(prepared)
        try:
            new = step.fn(prepared)
        except ModelError as e:
            print(f"NO  {step.name}: {e}")
            print("ortquant refuses this model as written (see the message above); nothing was run")
            return 1
        if new is not prepared:
            print(f"rewrite {step.name}:")
            for line in describe_changes(prepared, new):
                print(f"    {line}")
        prepared = new
    rows = check_model(prepared)
    if not rows:
        print("no custom-domain nodes after the rewrites")
    width = max((len(n.name or n.op_type) for n, _, _ in rows), default=0)
    for node, ok, why in rows:
        print(f"{'ok ' if ok else 'NO '} {(node.name or '<unnamed>'):<{width}}  {node.domain}::{node.op_type}  {why}")
    bad = sum(not ok for _, ok, _ in rows)
    if bad:
        print(f"{bad} of {len(rows)} custom node(s) not supported")
        failed = True
    # The truth: create the session exactly as ortquant.InferenceSession does.
    try:
        import ortquant

        so = __import__("onnxruntime").SessionOptions()
        so.log_severity_level = 3
        ortquant.InferenceSession(args.model, sess_options=so, exact=args.exact, integer=args.integer)
    except Exception as e:
        msg = str(e).strip()
        print(f"session creation fails: {_short(msg, 600)}")
        named = [(n, "") for n in _failing_nodes(msg, prepared)]
        culprits = named or isolate_failing_nodes(prepared)
        for node, why in culprits:
            explanation = next((r for n, ok, r in rows if n is node and not ok), None)
            if explanation is None:
                explanation = (
                    "onnxruntime refuses this node as written; ortquant has no rewrite for it "
                    "(docs/ops.md lists the accepted dtypes, domains and rewrites)"
                )
            detail = f" ({why})" if why else ""
            print(f"NO  {_node_key(node)}  {node.domain or 'ai.onnx'}::{node.op_type}  {explanation}{detail}")
        if not culprits:
            print("no single node fails on its own: the error comes from the graph as a whole (see the message)")
        return 1
    if failed:
        return 1
    print(f"{len(rows)} custom node(s), all supported; the session loads")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Write the model ``ortquant.InferenceSession`` would run, for C/C++ hosts (external data stays external)."""
    from ortquant._session import uses_external_data
    from ortquant.transforms import PrepareOptions, apply_pipeline

    header = onnx.load(args.input, load_external_data=False)
    external = uses_external_data(header)
    model = onnx.load(args.input, load_external_data=True) if external else header
    try:
        prepared, changed = apply_pipeline(model, PrepareOptions(exact=args.exact, integer=args.integer))
    except ValueError as e:  # ModelError, or exact together with integer
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = Path(args.output)
    if external:
        onnx.save(
            prepared,
            str(out),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=out.name + ".data",
            size_threshold=1024,
        )
    else:
        onnx.save(prepared, str(out))
    print(f"{out}: {', '.join(changed) if changed else 'no rewrite needed (copied as is)'}")
    if args.exact:
        print(
            "for qonnx's exact results run it with graph_optimization_level ORT_DISABLE_ALL and the session config "
            "entry session.disable_prepacking=1 (docs/ops.md, exact=True)"
        )
    return 0


class _Progress:
    """A progress bar on stderr for long runs: tqdm if installed, else rich, else a plain text bar; only on a
    terminal (and never with --no-progress), so piped output and JSON files stay clean."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self._n = 0
        self._total = total
        self._label = label
        self._impl: Any = None
        self._kind = "off"
        if not enabled or total <= 0 or not sys.stderr.isatty():
            return
        try:
            from tqdm import tqdm

            self._impl = tqdm(total=total, desc=label, unit="run", file=sys.stderr, leave=False)
            self._kind = "tqdm"
            return
        except ImportError:
            pass
        try:
            from rich.progress import Progress

            self._impl = Progress(transient=True)
            self._impl.start()
            self._task = self._impl.add_task(label, total=total)
            self._kind = "rich"
            return
        except ImportError:
            pass
        self._kind = "text"

    def update(self) -> None:
        self._n += 1
        if self._kind == "tqdm":
            self._impl.update(1)
        elif self._kind == "rich":
            self._impl.update(self._task, advance=1)
        elif self._kind == "text":
            width = 30
            done = int(width * self._n / self._total)
            sys.stderr.write(f"\r{self._label} [{'#' * done}{'.' * (width - done)}] {self._n}/{self._total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self._kind == "tqdm":
            self._impl.close()
        elif self._kind == "rich":
            self._impl.stop()
        elif self._kind == "text":
            sys.stderr.write("\r" + " " * (len(self._label) + 45) + "\r")
            sys.stderr.flush()


def _time_runs(fn: Any, runs: int, warmup: int, label: str, progress: bool = True) -> list[float]:
    bar = _Progress(warmup + runs, label, progress)
    try:
        for _ in range(warmup):
            fn()
            bar.update()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
            bar.update()
    finally:
        bar.close()
    return times


def _figures(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1e3 for t in times)
    return {
        "runs": len(ms),
        "median_ms": statistics.median(ms),
        "mean_ms": statistics.fmean(ms),
        "min_ms": ms[0],
        "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))],
        "max_ms": ms[-1],
    }


def _summary(times: list[float]) -> str:
    f = _figures(times)
    return f"median {f['median_ms']:.3f} ms, min {f['min_ms']:.3f} ms, p90 {f['p90_ms']:.3f} ms over {f['runs']} runs"


def _environment(sess: Any, threads: int) -> dict[str, Any]:
    import onnxruntime as ort

    import ortquant

    env: dict[str, Any] = {
        "ortquant": ortquant.__version__,
        "onnxruntime": ort.__version__,
        "python": sys.version.split()[0],
        "threads": threads,
        "inputs": {i.name: i.shape for i in sess.get_inputs()},
    }
    try:
        from ortquant.kernels import active_isa

        env["isa"] = active_isa()
    except Exception:  # the pybind module is optional for the CLI
        env["isa"] = None
    return env


def cmd_bench(args: argparse.Namespace) -> int:
    model = onnx.load(args.model)
    sess = _session(model, args.threads, integer=args.integer)
    feeds = _random_inputs(sess, args.batch)
    progress = not args.no_progress
    ours = _time_runs(lambda: sess.run(None, feeds), args.runs, args.warmup, "ortquant", progress)
    print(f"ortquant + onnxruntime: {_summary(ours)}")
    report: dict[str, Any] = {
        "model": str(args.model),
        "batch": args.batch,
        "warmup": args.warmup,
        **_environment(sess, args.threads),
        "ortquant_onnxruntime": _figures(ours),
    }
    rc = 0
    if args.qonnx:
        try:
            from qonnx.core.modelwrapper import ModelWrapper
            from qonnx.core.onnx_exec import execute_onnx
        except ImportError:
            print("qonnx is not installed: pip install qonnx")
            rc = 1
        else:
            wrapper = ModelWrapper(model)
            runs = max(1, min(args.runs, args.qonnx_runs))
            theirs = _time_runs(lambda: execute_onnx(wrapper, feeds), runs, 1, "qonnx", progress)
            print(f"qonnx execute_onnx:     {_summary(theirs)}")
            speedup = statistics.median(theirs) / statistics.median(ours)
            print(f"speedup: {speedup:.1f}x")
            report["qonnx_execute_onnx"] = _figures(theirs)
            report["speedup_vs_qonnx"] = speedup
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"figures written to {args.json}")
    return rc


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

    p = sub.add_parser("check", help="the rewrites, every custom node, and whether the session really loads")
    p.add_argument("model", type=Path)
    p.add_argument("--exact", action="store_true", help="check the exact=True form")
    p.add_argument("--integer", action="store_true", help="also say per layer whether integer mode runs it, and why")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("prepare", help="write the rewritten model a C/C++ host loads with the ortquant library")
    p.add_argument("input", type=Path)
    p.add_argument("output", type=Path)
    p.add_argument("--exact", action="store_true", help="the exact=True form (prints the session options it needs)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("bench", help="latency over many runs (optionally against qonnx's executor)")
    p.add_argument("model", type=Path)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=None, help="batch size for the first input dim")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--qonnx", action="store_true", help="also time qonnx's execute_onnx")
    p.add_argument("--qonnx-runs", type=int, default=10, help="at most this many qonnx runs (it is slow)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the figures as JSON to FILE")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown only on a terminal anyway)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
