"""Integer mode vs its peers on the Brevitas benchmark CNN (models/cnn4c2f_w4a4.onnx: 4 conv + 2 FC, 4-bit,
3x32x32), one intra-op thread, batch 1 and 32, all variants interleaved in one run:

- ``integer``: ``ortquant.InferenceSession(model, integer=True)`` (quantized layers on the int8 engine)
- ``default``: ``ortquant.InferenceSession(model)`` (weight quantizers folded into initializers)
- ``exact``: ``ortquant.InferenceSession(model, exact=True)`` (the model as exported, qonnx's bits)
- ``qcdq``: stock onnxruntime on the model converted by qonnx's ``QuantToQCDQ`` (QuantizeLinear/Clip/
  DequantizeLinear, which onnxruntime fuses into QLinearConv / QGemm where it can)
- ``float``: stock onnxruntime on the same network with every Quant node deleted (pure float)

Prints median latencies and the ratios the issue's goals are stated in. ``--quick`` runs fewer iterations;
``--profile`` also prints onnxruntime's per-op-type profile of the integer, float and QCDQ sessions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# numpy's OpenBLAS threads spin for a while after each numpy call; on a 2-vCPU machine they take the core the
# one-thread sessions run on (measured: ratios moved by up to 0.1). One BLAS thread is all the bench needs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import onnx
import onnxruntime as ort

import ortquant
import ortquant.kernels
from ortquant.transforms._util import QONNX_DOMAINS

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "cnn4c2f_w4a4.onnx"


def _options(profile: str | None = None) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = profile
    return so


def pure_float(model: onnx.ModelProto) -> onnx.ModelProto:
    """The network with every Quant / BipolarQuant / Trunc deleted (its output renamed to its input)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rename: dict[str, str] = {}
    keep = []
    for n in out.graph.node:
        if n.domain in QONNX_DOMAINS and n.op_type in ("Quant", "IntQuant", "BipolarQuant", "Trunc"):
            rename[n.output[0]] = rename.get(n.input[0], n.input[0])
        else:
            keep.append(n)
    for n in keep:
        for i, name in enumerate(n.input):
            n.input[i] = rename.get(name, name)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    for o in out.graph.output:
        if o.name in rename:  # a quantizer produced the graph output: keep the name with an Identity
            out.graph.node.append(onnx.helper.make_node("Identity", [rename[o.name]], [o.name]))
    used = {i for n in out.graph.node for i in n.input}
    inits = [t for t in out.graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(inits)
    del out.graph.value_info[:]
    return out


_QCDQ_SCRIPT = """
import sys
import onnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.qonnx_to_qcdq import QuantToQCDQ
m = ModelWrapper(onnx.load(sys.argv[1])).transform(QuantToQCDQ()).model
m.ir_version = 10
onnx.save(m, sys.argv[2])
"""


def qcdq(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """qonnx's QuantToQCDQ conversion (None when qonnx or onnxscript is missing).

    Run in a fresh interpreter: onnxscript builds onnx.reference's schema table on import, which refuses the
    ortquant schemas registered in this process (linger op names repeat across two domains).
    """
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "qcdq.onnx"
        onnx.save(model, str(src))
        r = subprocess.run([sys.executable, "-c", _QCDQ_SCRIPT, str(src), str(dst)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"note: QuantToQCDQ failed, no qcdq column: {r.stderr.strip().splitlines()[-1:]}")
            return None
        converted = onnx.load(str(dst))
    if any(n.domain in QONNX_DOMAINS for n in converted.graph.node):
        left = sorted({n.op_type for n in converted.graph.node if n.domain in QONNX_DOMAINS})
        print(f"note: QuantToQCDQ left {left} (run with ortquant registered)")
    return converted


def sessions(model: onnx.ModelProto) -> dict[str, ort.InferenceSession]:
    """The five variants (qcdq only when qonnx is installed)."""
    s = {
        "integer": ortquant.InferenceSession(model, sess_options=_options(), integer=True),
        "default": ortquant.InferenceSession(model, sess_options=_options()),
        "exact": ortquant.InferenceSession(model, sess_options=_options(), exact=True),
        "float": ort.InferenceSession(pure_float(model).SerializeToString(), _options(), ["CPUExecutionProvider"]),
    }
    q = qcdq(model)
    if q is not None:
        if any(n.domain in QONNX_DOMAINS for n in q.graph.node):
            s["qcdq"] = ortquant.InferenceSession(q, sess_options=_options(), exact=True)
        else:
            s["qcdq"] = ort.InferenceSession(q.SerializeToString(), _options(), ["CPUExecutionProvider"])
    return s


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, per_round: int) -> dict[str, float]:
    """Median ms per call of each fn; each round runs every fn per_round times, in turn (noise hits all alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        for _ in range(5):
            fn()
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            times[k].append((time.perf_counter() - t0) * 1e3 / per_round)
    return {k: statistics.median(v) for k, v in times.items()}


def profile(
    make: Callable[[ort.SessionOptions], ort.InferenceSession], x: np.ndarray, runs: int = 200
) -> list[tuple[str, str, float]]:
    """Per-node mean microseconds per run of the session ``make(options)`` builds (onnxruntime's profiler)."""
    with tempfile.TemporaryDirectory() as tmp:
        sess = make(_options(str(Path(tmp) / "prof")))
        name = sess.get_inputs()[0].name
        for _ in range(runs):
            sess.run(None, {name: x})
        path = sess.end_profiling()
        events = json.loads(Path(path).read_text())
    acc: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            key = (e["name"][: -len("_kernel_time")], e["args"].get("op_name", ""))
            acc.setdefault(key, []).append(float(e["dur"]))
    rows = [(k[0], k[1], sum(v) / runs) for k, v in acc.items()]
    return sorted(rows, key=lambda r: -r[2])


def print_profiles(model: onnx.ModelProto, x: np.ndarray, runs: int) -> None:
    """Where the time goes: per-op-type totals (us per run) of the integer, default, pure-float and QCDQ sessions."""
    makers: dict[str, Callable[[ort.SessionOptions], ort.InferenceSession]] = {
        "integer": lambda so: ortquant.InferenceSession(model, sess_options=so, integer=True),
        "default": lambda so: ortquant.InferenceSession(model, sess_options=so),
        "float": lambda so: ort.InferenceSession(pure_float(model).SerializeToString(), so, ["CPUExecutionProvider"]),
    }
    q = qcdq(model)
    if q is not None:
        makers["qcdq"] = lambda so: ort.InferenceSession(q.SerializeToString(), so, ["CPUExecutionProvider"])
    for label, make in makers.items():
        rows = profile(make, x, runs)
        by_op: dict[str, float] = {}
        for _node, op, us in rows:
            by_op[op] = by_op.get(op, 0.0) + us
        total = sum(by_op.values())
        parts = ", ".join(f"{op} {us:.0f}" for op, us in sorted(by_op.items(), key=lambda r: -r[1]))
        print(f"  {label:<8} {total:8.0f} us in nodes: {parts}")


def main(argv: list[str]) -> int:
    """Time the five variants at batch 1 and 32 and print the ratios."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--model", type=Path, default=MODEL)
    args = p.parse_args(argv)
    model = onnx.load(str(args.model))
    print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}, isa {ortquant.kernels.active_isa()}, "
          f"model {args.model.name}, 1 thread")  # fmt: skip
    sess = sessions(model)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    iname = model.graph.input[0].name
    print("| batch | " + " | ".join(f"{k} ms" for k in sess) + " | integer/qcdq | integer/float | default/float |")
    print("|---" * (len(sess) + 4) + "|")
    for batch in (1, 32):
        x = np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32)
        feeds = {iname: x}
        fns = {k: (lambda s=s, f=feeds: s.run(None, f)) for k, s in sess.items()}
        rounds, per_round = (5, 5) if args.quick else ((40, 25) if batch == 1 else (30, 3))
        med = interleaved(fns, rounds, per_round)
        q = med.get("qcdq", float("nan"))
        print(f"| {batch} | " + " | ".join(f"{med[k]:.3f}" for k in sess)
              + f" | {med['integer'] / q:.2f} | {med['integer'] / med['float']:.2f} | "
              f"{med['default'] / med['float']:.2f} |")  # fmt: skip
        if args.profile:
            print(f"batch {batch}, onnxruntime profiler, us per run by op type:")
            print_profiles(model, x, 20 if args.quick else (200 if batch == 1 else 20))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
