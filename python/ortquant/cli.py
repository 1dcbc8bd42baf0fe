"""The ``ortquant`` command line: run, check and benchmark models with ortquant's ops.

ortquant run MODEL [--input name=file.npy ...] [--random] [--threads N]
ortquant check MODEL [--exact] [--integer] [--json]
ortquant prepare IN.onnx OUT.onnx [--exact] [--integer] [--no-verify]
ortquant bench MODEL [--runs N] [--warmup N] [--batch N] [--qonnx] [--json FILE] [--no-progress]
ortquant --version

Exit status: 0 success; 1 `check` found a node or rewrite that fails (the report says which), or bench's --qonnx
without qonnx; 2 an error (a file that is missing or not a model, a model ortquant or onnxruntime refuses, a bad
argument), reported in one line on stderr; 3 an internal error of ortquant (please report it). ``--debug`` shows
the Python traceback of an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ortquant._session import NOT_SUPPORTED as _NOT_SUPPORTED
from ortquant._session import load_model, unsupported_op_hint

_STANDARD_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training"}


class UsageError(Exception):
    """A bad argument found while running a command (reported in one line, exit status 2)."""


def _onnxruntime() -> Any:
    """onnxruntime, or the ImportError (one line) that says what is wrong with its installation."""
    from ortquant._library import import_onnxruntime

    return import_onnxruntime()


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


def _session(model: Path, threads: int, integer: bool = False) -> Any:
    import ortquant

    ort = _onnxruntime()

    so = ort.SessionOptions()
    if threads > 0:
        so.intra_op_num_threads = threads
    so.log_severity_level = 4  # errors are reported by the CLI, in one line
    return ortquant.InferenceSession(model, sess_options=so, integer=integer)


def _random_inputs(sess: Any, batch: int | None, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        dtype = _ORT_TYPES.get(i.type)
        if dtype is None:
            raise UsageError(f"input {i.name}: type {i.type} is not supported by --random; pass --input")
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


def _read_npy(name: str, path: str) -> np.ndarray:
    try:
        value = np.load(path, allow_pickle=False)
    except FileNotFoundError as e:
        raise UsageError(f"--input {name}={path}: no such file") from e
    except IsADirectoryError as e:
        raise UsageError(f"--input {name}={path}: a directory, not a .npy file") from e
    except OSError as e:
        raise UsageError(f"--input {name}={path}: cannot read it ({e.strerror or e})") from e
    except Exception as e:  # numpy raises ValueError/EOFError/UnpicklingError for what is not a .npy file
        detail = " ".join(str(e).split())
        if "pickle" in detail:  # numpy's guess for any file without its header
            detail = "no .npy header; pickled files are not read"
        raise UsageError(f"--input {name}={path}: not a .npy file written by numpy.save ({detail})") from e
    if not isinstance(value, np.ndarray):
        value.close()
        raise UsageError(f"--input {name}={path}: an .npz archive; save the one array with numpy.save (.npy)")
    return value


def _conform(name: str, path: str, value: np.ndarray, meta: Any) -> np.ndarray:
    """``value`` in the element type the model declares for input ``meta``: converted when that is safe (within a
    kind, or integers into floats, or integers that all fit), else a UsageError saying what is expected."""
    want = _ORT_TYPES.get(meta.type)
    if want is None or value.dtype == want:
        return value
    want_dt = np.dtype(want)
    expected = f"the model expects {want_dt.name} with shape {list(meta.shape)}"
    ok = value.dtype.kind in "fiub" and (
        (want_dt.kind == "f" and value.dtype.kind in "fiu")
        or (want_dt.kind in "iu" and value.dtype.kind in "iub" and _fits(value, want_dt))
    )
    if not ok:
        raise UsageError(f"--input {name}={path}: holds {value.dtype.name}, {expected}; save it as {want_dt.name}")
    print(
        f"note: input {name}: {value.dtype.name} from {path} converted to {want_dt.name} (the model's type)",
        file=sys.stderr,
    )
    return value.astype(want_dt)


def _fits(value: np.ndarray, dtype: np.dtype) -> bool:
    if value.size == 0:
        return True
    info = np.iinfo(dtype)
    return bool(info.min <= value.min() and value.max() <= info.max)


def _parse_inputs(specs: Sequence[str], sess: Any) -> dict[str, np.ndarray]:
    metas = {i.name: i for i in sess.get_inputs()}
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input expects NAME=FILE.npy, got {spec!r}")
        if name not in metas:
            raise UsageError(f"--input {spec}: the model has no input {name!r}; its inputs: {', '.join(metas)}")
        feeds[name] = _conform(name, path, _read_npy(name, path), metas[name])
    return feeds


def _fmt_array(a: np.ndarray) -> str:
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        return f"{a.dtype} {list(a.shape)}\n{a}"


def cmd_run(args: argparse.Namespace) -> int:
    _onnxruntime()
    sess = _session(args.model, args.threads, integer=args.integer)
    feeds = _parse_inputs(args.input, sess)
    missing = [i.name for i in sess.get_inputs() if i.name not in feeds]
    if missing:
        if not args.random:
            raise UsageError(f"missing inputs {missing}: pass --input name=file.npy or --random")
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
    from ortquant.transforms._util import opset_version

    supported = ortquant.supported_ops()
    trunc_problems = check_trunc_versions(model)  # each starts with "<op> node '<name or first output>':"
    rows = []
    for node in model.graph.node:
        if node.domain in _STANDARD_DOMAINS:
            continue
        key = (node.domain, node.op_type)
        if key not in supported and node.op_type in _NOT_SUPPORTED:
            rows.append((node, False, _NOT_SUPPORTED[node.op_type]))
        elif key not in supported:
            hint = unsupported_op_hint(node.domain, node.op_type, opset_version(model, node.domain))
            rows.append((node, False, f"no ortquant kernel for {node.domain}::{node.op_type}: {hint}"))
        elif trunc := [p for p in trunc_problems if p.startswith(f"{node.op_type} node '{_node_key(node)}':")]:
            rows.append((node, False, trunc[0]))
        else:
            rows.append((node, True, "native kernel"))
    return rows


def print_integer_plan(model: onnx.ModelProto, plan: Sequence[Any] | None = None) -> None:
    """Integer mode's decision per Conv / MatMul / Gemm layer: the path it takes and why."""
    from ortquant.transforms.lower_integer import integer_plan

    if plan is None:
        plan = integer_plan(model)
    if not plan:
        print("integer mode: no Conv / MatMul / Gemm layers")
        return
    width = max(len(d.node) for d in plan)
    for d in plan:
        print(f"{'int  ' if d.integer else 'float'} {d.node:<{width}}  {d.op_type:<6}  {d.reason}")
    n = sum(d.integer for d in plan)
    print(f"integer mode: {n} of {len(plan)} layer(s) on the integer path")
    if n == 0:
        print("integer mode: nothing is lowered, the model runs in float as without --integer")


def _node_key(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else "<unnamed>")


def describe_changes(before: onnx.ModelProto, after: onnx.ModelProto) -> list[str]:
    """What one transform did, node by node: moved (domain/op changed), replaced, added; declared types changed.

    A declared type is reported as dropped only when its value is still computed by a node of ``after``: the
    declarations of values whose nodes were removed (folded into initializers, lowered) go with those nodes."""
    old = {_node_key(n): n for n in before.graph.node}
    new = {_node_key(n): n for n in after.graph.node}
    lines = []
    if before.ir_version != after.ir_version:
        lines.append(f"IR version {before.ir_version} -> {after.ir_version}")
    for key, n in new.items():
        o = old.get(key)
        if o is None:
            lines.append(f"added {n.domain or 'ai.onnx'}::{n.op_type} '{key}'")
        elif (o.domain, o.op_type) != (n.domain, n.op_type):
            lines.append(f"'{key}': {o.domain or 'ai.onnx'}::{o.op_type} -> {n.domain or 'ai.onnx'}::{n.op_type}")
        elif list(o.input) != list(n.input) or o.attribute != n.attribute:
            lines.append(f"'{key}': {n.domain or 'ai.onnx'}::{n.op_type} rewritten")
    removed = [o for key, o in old.items() if key not in new]
    for o in removed:
        lines.append(f"removed {o.domain or 'ai.onnx'}::{o.op_type} '{_node_key(o)}'")
    computed = {out for n in after.graph.node for out in n.output if out}
    folded = {t.name for t in after.graph.initializer} - {t.name for t in before.graph.initializer}
    types_before = {v.name: v.type.tensor_type.elem_type for v in [*before.graph.value_info, *before.graph.output]}
    types_after = {v.name: v.type.tensor_type.elem_type for v in [*after.graph.value_info, *after.graph.output]}
    gone = 0
    for name, t in types_before.items():
        if name not in types_after:
            if name in computed:
                lines.append(
                    f"value '{name}': declared {onnx.TensorProto.DataType.Name(t)} dropped (contradicts the op)"
                )
            elif name not in folded:
                gone += 1
        elif types_after[name] != t:
            lines.append(
                f"value '{name}': declared {onnx.TensorProto.DataType.Name(t)} -> "
                f"{onnx.TensorProto.DataType.Name(types_after[name])}"
            )
    if folded:
        lines.append(f"{len(folded)} initializer(s) added")
    if gone:
        lines.append(f"{gone} declared value type(s) removed with their nodes")
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


# onnxruntime prefixes its messages with "[ONNXRuntimeError] : <code> : <STATUS> :" and, for failed enforcements,
# a source location; neither helps a user.
_ORT_PREFIX = re.compile(r"\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:?\s*")
_ORT_LOCATION = re.compile(r"\S+\.(?:cc|h|cpp|cu):\d+\s+")


def clean_message(message: str) -> str:
    """onnxruntime's message on one line, without its status prefix and source location."""
    text = " ".join(_ORT_PREFIX.sub("", message).split())
    if " was false. " in text:
        text = text.split(" was false. ", 1)[1]
    text = _ORT_LOCATION.sub("", text).replace("Exception during initialization: ", "")
    return text.strip()


def _short(message: str, limit: int = 220) -> str:
    """The informative tail of an onnxruntime error, at most ``limit`` characters."""
    text = clean_message(message)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def isolate_failing_nodes(model: onnx.ModelProto, max_nodes: int = 2000) -> list[tuple[onnx.NodeProto, str]]:
    """Each top-level node of ``model`` in a one-node session (inferred input types, its initializers); the nodes
    whose session creation fails, with onnxruntime's message. Used when onnxruntime's error names no node."""
    import ortquant

    ort = _onnxruntime()
    from ortquant.transforms._util import infer_shapes

    inferred = infer_shapes(model)
    if inferred is None:
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
            failures.append((node, _short(str(e), 400)))
    return failures


def _path_of(node: onnx.NodeProto, supported: frozenset[tuple[str, str]]) -> str:
    """Which code runs ``node``: onnxruntime's own kernel, ortquant's, ortquant's integer engine, or none."""
    if node.domain in _STANDARD_DOMAINS:
        return "onnxruntime"
    if (node.domain, node.op_type) not in supported:
        return "none"
    return "ortquant integer engine" if node.domain == "ortquant.integer" else "ortquant kernel"


def semantics_notes(model: onnx.ModelProto) -> list[str]:
    """Places where the file's meaning (qonnx's, which ortquant follows) may differ from what the exporting
    framework computed: a signed Quant of bit width 1 is qonnx's bipolar case (+-1 times the scale), where Brevitas'
    signed 1-bit integer quantizer has the levels -1 and 0."""
    from ortquant.transforms import _read
    from ortquant.transforms._util import QONNX_DOMAINS

    inits = {t.name: t for t in model.graph.initializer}
    notes = []
    for node in model.graph.node:
        if node.domain not in (*QONNX_DOMAINS, "", "ai.onnx") or node.op_type not in ("Quant", "IntQuant"):
            continue
        if len(node.input) < 4 or node.input[3] not in inits:
            continue
        try:
            signed = _read.attr_int(node, "signed", 1)
            bits = _read.tensor_array(inits[node.input[3]])
        except Exception:  # a malformed node: the rewrites and the session report it
            continue
        if signed == 1 and bits.size == 1 and float(bits.ravel()[0]) == 1.0:
            notes.append(
                f"{node.op_type} '{_node_key(node)}' is signed with bit width 1: qonnx and ortquant compute it as "
                "bipolar, +-1 x scale (Brevitas' signed 1-bit integer quantizer has the levels -1 and 0 instead; "
                "an unsigned or BipolarQuant quantizer says which is meant)"
            )
    return notes


def cmd_check(args: argparse.Namespace) -> int:
    """Report what ortquant does with a model: the rewrites, every custom node, and the real session creation.

    Exit status 0 when the session loads and every custom node is supported, 1 when not (the report says why)."""
    import ortquant
    from ortquant.transforms import PIPELINE, ModelError, PrepareOptions
    from ortquant.transforms.lower_integer import integer_plan

    ort = _onnxruntime()
    try:
        options = PrepareOptions(exact=args.exact, integer=args.integer)
    except ValueError as e:
        raise UsageError(str(e)) from e
    model = load_model(args.model, load_external_data=False)
    as_json = bool(getattr(args, "json", False))
    report: dict[str, Any] = {
        "model": str(args.model),
        "ortquant": _version(),
        "onnxruntime": getattr(ort, "__version__", None),
        "exact": args.exact,
        "integer": args.integer,
        "rewrites": [],
        "integer_plan": None,
        "refused_by": None,
        "loads": False,
        "error": None,
        "nodes": [],
        "notes": semantics_notes(model),
    }
    out: list[str] = [f"note: {n}" for n in report["notes"]]  # the text report

    def finish(rc: int) -> int:
        if as_json:
            report["status"] = rc
            print(json.dumps(report, indent=2))
        else:
            for line in out:
                print(line)
        return rc

    prepared = model
    for step in PIPELINE:
        if not step.when(options):
            continue
        if step.name == "lower_integer":
            plan = integer_plan(prepared)
            report["integer_plan"] = [
                {"node": d.node, "op": d.op_type, "integer": bool(d.integer), "reason": d.reason} for d in plan
            ]
            with contextlib.redirect_stdout(_Lines(out)):
                print_integer_plan(prepared, plan)
        try:
            new = step.fn(prepared)
        except Exception as e:
            if not (isinstance(e, ModelError) or _from_onnxruntime(e)):
                raise
            why = _short(str(e), 600)
            report["refused_by"] = step.name
            report["error"] = why
            out.append(f"NO  {step.name}: {why}")
            out.append("ortquant refuses this model as written (see the message above); nothing was run")
            return finish(1)
        if new is not prepared:
            changes = describe_changes(prepared, new)
            report["rewrites"].append({"step": step.name, "changes": changes})
            out.append(f"rewrite {step.name}:")
            out.extend(f"    {line}" for line in changes)
        prepared = new
    rows = check_model(prepared)
    static = {id(n): (ok, why) for n, ok, why in rows}

    # The truth: create the session exactly as ortquant.InferenceSession does.
    refused: dict[int, str] = {}
    session_error = None
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the integer plan above already says what integer mode does
            ortquant.InferenceSession(args.model, sess_options=so, exact=args.exact, integer=args.integer)
    except Exception as e:
        session_error = _short(str(e), 600)
        named = _failing_nodes(str(e), prepared)
        culprits = [(n, session_error) for n in named]
        if not culprits:
            try:
                culprits = isolate_failing_nodes(prepared)
            except Exception:  # best effort: the session's own message is reported anyway
                culprits = []
        refused = {id(n): why for n, why in culprits}
    report["loads"] = session_error is None
    report["error"] = session_error

    supported = ortquant.supported_ops()
    shown: list[tuple[str, onnx.NodeProto, str, str]] = []  # (status, node, path, reason) for the text report
    for node in prepared.graph.node:
        path = _path_of(node, supported)
        ok, why = static.get(id(node), (True, "onnxruntime's own kernel"))
        if id(node) in refused:
            if ok:  # ortquant has the kernel, onnxruntime says what is wrong with the node
                why = f"onnxruntime refuses this node: {refused[id(node)]}"
            ok = False
        report["nodes"].append(
            {
                "name": _node_key(node),
                "op": node.op_type,
                "domain": node.domain or "ai.onnx",
                "path": path,
                "ok": ok,
                "reason": why,
            }
        )
        if id(node) in static or not ok:
            shown.append(("ok " if ok else "NO ", node, path, why))

    if not rows:
        out.append("no custom-domain nodes after the rewrites")
    width = max((len(_node_key(n)) for _, n, _, _ in shown), default=0)
    for status, node, _path, why in shown:
        out.append(f"{status} {_node_key(node):<{width}}  {node.domain or 'ai.onnx'}::{node.op_type}  {why}")
    bad_custom = sum(not ok for _, ok, _ in rows)
    if bad_custom:
        out.append(f"{bad_custom} of {len(rows)} custom node(s) not supported")
    if session_error is not None:
        out.append(f"session creation fails: {'see the node(s) above' if refused else session_error}")
        if not refused:
            out.append("no single node fails on its own: the error comes from the graph as a whole (see the message)")
        return finish(1)
    if bad_custom:
        return finish(1)
    out.append(f"{len(rows)} custom node(s), all supported; the session loads")
    return finish(0)


class _Lines:
    """A text stream that collects printed lines into a list (to order the text report)."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self._part = ""

    def write(self, text: str) -> int:
        self._part += text
        *done, self._part = self._part.split("\n")
        self._lines.extend(done)
        return len(text)

    def flush(self) -> None:
        pass


def _verify_loads(path: Path) -> str | None:
    """Why a C/C++ host cannot load ``path`` (a plain onnxruntime session with only libortquant.so registered), or
    None when it loads."""
    import ortquant

    ort = _onnxruntime()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.register_custom_ops_library(ortquant.library_path())
    try:
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        return _short(str(e), 600)
    return None


def cmd_prepare(args: argparse.Namespace) -> int:
    """Write the model ``ortquant.InferenceSession`` would run, for C/C++ hosts (external data stays external),
    after checking that it loads in onnxruntime with only the ortquant library registered."""
    from ortquant._session import uses_external_data
    from ortquant.transforms import ModelError, PrepareOptions, apply_pipeline

    try:
        options = PrepareOptions(
            exact=args.exact, integer=args.integer, overridable_initializers=args.overridable_initializers
        )
    except ValueError as e:
        raise UsageError(str(e)) from e
    batch: int | None = None
    if args.batch is not None and args.batch != "dynamic":
        try:
            batch = int(args.batch)
        except ValueError:
            batch = 0
        if batch < 1:
            raise UsageError(f"--batch {args.batch}: give a positive integer or 'dynamic'")
    out = Path(args.output)
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"cannot write {out}: the folder {folder} does not exist")
    if out.is_dir():
        raise UsageError(f"cannot write {out}: it is a folder; give the output file's name")
    try:
        _onnxruntime()
        ort_problem = None
    except ImportError as e:
        if not args.no_verify:
            raise UsageError(f"{e} (the written model is checked with it; --no-verify skips that check)") from e
        ort_problem = e
    header = load_model(args.input, load_external_data=False)
    external = uses_external_data(header)
    model = load_model(args.input, load_external_data=True) if external else header
    try:
        prepared, changed = apply_pipeline(model, options)
    except Exception as e:
        if ort_problem is None or isinstance(e, ModelError):
            raise
        # the weight quantizers are evaluated with onnxruntime, whatever --no-verify says
        raise UsageError(f"{ort_problem} (this model needs it: {type(e).__name__}: {e})") from e
    if args.batch is not None:
        from ortquant.transforms.batch_size import set_batch_size

        prepared = set_batch_size(prepared, batch)  # ModelError naming the node where rows mix
    lowered = "lower_integer" in changed or any(n.domain == "ortquant.integer" for n in prepared.graph.node)
    if args.integer and not lowered:
        print(
            f"warning: --integer lowered no layer; {out} runs in float (ortquant check --integer {args.input} "
            "says why for each layer)",
            file=sys.stderr,
        )
    # Written next to the output under a temporary name, checked, then renamed: a failed check leaves nothing.
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from e
    os.close(fd)
    tmp = Path(tmp_name)
    _give_mode_of_a_new_file(tmp, out)
    data = folder / (out.name + ".data")
    try:
        if external:
            onnx.save(
                prepared,
                str(tmp),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=data.name,
                size_threshold=1024,
            )
        else:
            onnx.save(prepared, str(tmp))
        problem = None if args.no_verify else _verify_loads(tmp)
        if problem is not None:
            if external:
                data.unlink(missing_ok=True)
            raise UsageError(
                f"{args.input}: the prepared model does not load in onnxruntime with the ortquant library "
                f"registered, so {out} was not written: {problem} (`ortquant check {args.input}` names the nodes; "
                "--no-verify writes it anyway)"
            )
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"{out}: {', '.join(changed) if changed else 'no rewrite needed (copied as is)'}")
    if args.exact:
        print(
            "for qonnx's exact results run it with graph_optimization_level ORT_DISABLE_ALL and the session config "
            "entry session.disable_prepacking=1 (docs/ops.md, exact=True)"
        )
    return 0


def _give_mode_of_a_new_file(tmp: Path, out: Path) -> None:
    """Give tmp the permissions `out` gets when renamed over: those of the file it replaces, else a new file's
    (0o666 less the umask). mkstemp makes its file 0o600, which a server running as another user cannot read."""
    try:
        mode = out.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0o022)  # reading the umask means setting it; put it back at once (the CLI is one thread)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        os.chmod(tmp, mode)
    except OSError:
        pass  # a file system without modes: the file keeps what it has


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

    env: dict[str, Any] = {
        "ortquant": _version(),
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
    if args.json is not None and not (args.json.parent if str(args.json.parent) else Path(".")).is_dir():
        raise UsageError(f"--json {args.json}: the folder {args.json.parent} does not exist")
    if args.runs < 1 or args.warmup < 0:
        raise UsageError(f"--runs must be at least 1 and --warmup at least 0 (got {args.runs}, {args.warmup})")
    _onnxruntime()
    sess = _session(args.model, args.threads, integer=args.integer)
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
            wrapper = ModelWrapper(load_model(args.model))
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


def _version() -> str:
    """ortquant's version: the package's ``__version__``, else the installed distribution's, else pyproject's."""
    import ortquant

    version = getattr(ortquant, "__version__", None)
    if version:
        return str(version)
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        return dist_version("ortquant")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        m = re.search(r'(?ms)^\[project\].*?^version\s*=\s*"([^"]+)"', pyproject.read_text())
    except OSError:
        m = None
    return m.group(1) if m else "unknown"


def _version_line() -> str:
    """``ortquant X`` with the native library's and onnxruntime's versions (or why they are unavailable)."""
    import ortquant

    try:
        native = ortquant.native_version()
    except OSError as e:
        native = f"not loadable ({' '.join(str(e).split())})"
    try:
        ort = f"onnxruntime {_onnxruntime().__version__}"
    except ImportError:
        ort = "onnxruntime not usable (ortquant check says why)"
    return f"ortquant {_version()} (native library {native}; {ort})"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        print(_version_line())
        parser.exit()


def _raised_in(e: BaseException) -> str:
    """The file of the innermost Python frame ``e`` went through ("" when it has no traceback)."""
    tb = e.__traceback__
    last = ""
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last


def _from_onnxruntime(e: BaseException) -> bool:
    """Whether ``e`` was raised by onnxruntime (its pybind exceptions, or Python code of the onnxruntime package)."""
    return type(e).__module__.startswith("onnxruntime") or f"{os.sep}onnxruntime{os.sep}" in _raised_in(e)


def _installation_problem(e: BaseException) -> bool:
    """An error of ortquant's installation checks (the native library, the onnxruntime version)."""
    return isinstance(e, RuntimeError) and Path(_raised_in(e)).name == "_library.py"


def error_line(e: BaseException) -> tuple[str, int]:
    """The one line the CLI prints for ``e``, and the exit status: 2 for errors in the input, the arguments or the
    installation, 3 for an internal error of ortquant."""
    from ortquant.transforms import ModelError

    text = clean_message(str(e))
    if isinstance(e, (ModelError, UsageError, ImportError)) or _from_onnxruntime(e) or _installation_problem(e):
        return text or type(e).__name__, 2
    if isinstance(e, OSError):
        what = f"{e.strerror} ({e.filename})" if e.strerror and e.filename else text
        return what or type(e).__name__, 2
    return f"internal error ({type(e).__name__}: {text}); please report it with the output of --debug", 3


def _one_line_warning(message: Any, category: type[Warning], *_args: Any, **_kwargs: Any) -> None:
    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ortquant`` command."""
    parser = argparse.ArgumentParser(
        prog="ortquant",
        description=__doc__.split("\n")[0].replace("``", ""),
        epilog="exit status: 0 ok; 1 check found a problem; 2 error (one line on stderr); 3 internal error",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the versions of ortquant and onnxruntime")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", parents=[common], help="run a model once and print its outputs and latency")
    p.add_argument("model", type=Path)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--random", action="store_true", help="random values for inputs not given")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime's default)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "check", parents=[common], help="the rewrites, every custom node, and whether the session really loads"
    )
    p.add_argument("model", type=Path)
    p.add_argument("--exact", action="store_true", help="check the exact=True form")
    p.add_argument("--integer", action="store_true", help="also say per layer whether integer mode runs it, and why")
    p.add_argument("--json", action="store_true", help="one JSON document: model-level fields and one object per node")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "prepare", parents=[common], help="write the rewritten model a C/C++ host loads with the ortquant library"
    )
    p.add_argument("input", type=Path)
    p.add_argument("output", type=Path)
    p.add_argument("--exact", action="store_true", help="the exact=True form (prints the session options it needs)")
    p.add_argument("--integer", action="store_true", help=_INTEGER_HELP)
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="write the output without checking that onnxruntime loads it with the ortquant library",
    )
    p.add_argument(
        "--batch",
        default=None,
        metavar="N|dynamic",
        help="set the batch dimension (a fixed batch of 1 in most exports) to N or make it symbolic",
    )
    p.add_argument(
        "--overridable-initializers",
        action="store_true",
        help="keep initializers the file lists as graph inputs as inputs (default: they become constants)",
    )
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("bench", parents=[common], help="latency over many runs (optionally against qonnx's executor)")
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
    with warnings.catch_warnings():
        if not args.debug:
            warnings.showwarning = _one_line_warning
        try:
            return int(args.func(args))
        except KeyboardInterrupt:
            if args.debug:
                raise
            print(f"ortquant {args.command}: interrupted", file=sys.stderr)
            return 130
        except Exception as e:
            if args.debug:
                raise
            line, status = error_line(e)
            model = getattr(args, "model", None) or getattr(args, "input", None)
            if (
                model is not None
                and not isinstance(e, (UsageError, ImportError))
                and not _installation_problem(e)
                and str(model) not in line
            ):
                line = f"{model}: {line}"  # which file, when the message names only the node
            print(f"ortquant {args.command}: error: {line}", file=sys.stderr)
            return status


if __name__ == "__main__":
    sys.exit(main())
