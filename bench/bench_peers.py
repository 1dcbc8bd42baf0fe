"""ortquant against what users would run instead, on models as published: correctness first, then speed.

    PYTHONPATH=python .venv/bin/python bench/bench_peers.py [MODEL.onnx ...] [--batch 1,8] [--json OUT] [--quick]

Sides (each a session over the same model, one intra-op thread):

- ``ortquant-integer``: ``ortquant.InferenceSession(path, integer=True)`` on the file as published.
- ``ortquant-default``: ``ortquant.InferenceSession(path)`` (weight quantizers folded into float initializers).
- ``ort-qcdq``: stock onnxruntime (all graph optimizations, so its QDQ fusions to QLinearConv / MatMulInteger
  etc.) on qonnx's QCDQ form of the model (``qonnx.transformation.qonnx_to_qcdq.QuantToQCDQ``: Quant ->
  QuantizeLinear [-> Clip] -> DequantizeLinear), with every weight's QuantizeLinear [-> Clip] evaluated into an
  int8 / uint8 initializer (the QDQ form quantization tools emit: DequantizeLinear of integer weights).
- ``ort-qcdq-unfused``: the same model with onnxruntime's graph optimizations off (QuantizeLinear, Clip,
  DequantizeLinear and float Conv / MatMul as written): the QCDQ form's own answer, for correctness.
- ``openvino-int8``: OpenVINO (``pip install openvino``; optional) on that same int8-weight QCDQ model, which its
  low-precision transformations run as int8 Conv / MatMul, f32 inference precision, one stream, one thread
  (``--threads``: that many).
- ``openvino-qcdq``: OpenVINO on qonnx's QCDQ form as converted (weights float, each behind its QuantizeLinear
  [-> Clip] -> DequantizeLinear): OpenVINO keeps those weights' quantization in float.
- ``float``: the float network: the ortquant default model (weight quantizers replaced by their dequantized
  float weights, i.e. the same weights) with every activation quantizer (Quant / IntQuant / BipolarQuant / Trunc)
  deleted, its output renamed to its input; other custom ops (MultiThreshold) stay and run on ortquant.
  Its ``correct`` is reported as measured; a float network is not expected to match the quantized one, it is
  the baseline of the ratio goal.
- ``floor``: what any side pays before its layers: onnxruntime running one ``Identity`` per model input (the same
  inputs, copied to outputs) through the same Python call. No side can take less; where ``0.65 x float`` is below
  it, the ratio goal is out of reach at that batch whatever the kernels do. Not checked for correctness.

The peers' models start from the published file with the weights that are listed as graph inputs made constants
(removed from the inputs, as a user would before converting), ortquant's domain / declared-type fixes and
channels-last rewrite applied (those change no value; qonnx's converter does not know the legacy domains).

Correctness: every side runs the reference inputs first, cycled to the batch (batch 8 from 4 samples: each twice;
the expected outputs likewise), and is compared with qonnx's ``execute_onnx`` output: the ``.npz`` next to the
model (realworld corpus: ``in:<name>`` / ``out:<name>``, one sample; models/: ``input_b4`` / ``output_b4``, four),
else qonnx is run here in a subprocess on a ``default_rng(0)`` normal input. A side is correct when every output
element is within ``1e-5 * max|reference|`` of the reference except at most ``--max-mismatch`` of them (default
1%: integer mode's contract lets float noise move a later quantizer by one step, docs/ops.md) and, for ``[N, C]``
outputs, every row has the reference's argmax. The JSON records ``mismatch`` (that fraction) and ``max_abs_err``
per side.

Timing: the sides that ran are timed interleaved in this one process (``bench_gemm.alternating_medians`` with
``time.process_time``: CPU time of the whole process, which also counts OpenVINO's worker thread), three
interleaved runs; ``median_cpu_us`` is the median of the three runs' medians, ``min_cpu_us`` their minimum,
``ratio`` a side's median over ortquant-integer's. ``--threads N`` (N > 1): every side gets N intra-op threads
(OpenVINO N inference threads), onnxruntime's idle threads do not spin, and the times are wall-clock
(``time.perf_counter``), since CPU time would add the threads up. JSON: a list with one object per model and batch,
``{"model", "batch", "threads", "clock" ("cpu" or "wall"), "isa", "cpu", "sides": {name: {"correct", "error",
"median_cpu_us", "min_cpu_us", "ratio", "mismatch", "max_abs_err"}}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see bench_integer.py
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gemm import alternating_medians
from bench_integer import pure_float, qcdq

import ortquant
import ortquant.kernels
from ortquant.transforms._util import QONNX_DOMAINS
from ortquant.transforms.channels_last import rewrite_channels_last
from ortquant.transforms.declared_types import fix_declared_types
from ortquant.transforms.integer_chain import unchain
from ortquant.transforms.legacy_domains import fix_legacy_domains

LAYER_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
ROOT = Path(__file__).resolve().parents[1]
REALWORLD = ROOT.parent / "shared" / "conformance" / "realworld"
# Without model arguments (``make bench``): the models of BENCHMARKS.md's summary table that are present.
DEFAULT_MODELS = [
    *(ROOT / "models" / f"{m}.onnx" for m in ("cnn4c2f_w4a4", "cnn_w4a4", "int8_resblock", "resnet_mini_w6a6",
                                            "mixed_bits")),
    *(REALWORLD / f"{m}.onnx" for m in ("qonnx_espcn_nn_resize_w4a4", "qonnx_espcn_subpixel_w4a4",
                                        "radioml_vgg10_w8a8", "tiny_kws_w3a3", "labs_gtsrb12_w2a3", "qonnx2mdc_mnist",
                                        "exm_separable_conv_ch_last", "exm_branched_model_ch_last",
                                        "exm_tiny_unet_ch_last", "qkt_qconv2d_conversion", "zoo_qkeras_jettagging")),
]  # fmt: skip
SIDES = (
    "ortquant-integer",
    "ortquant-default",
    "ort-qcdq",
    "ort-qcdq-unfused",
    "openvino-int8",
    "openvino-qcdq",
    "float",
    "floor",
)
# Intra-op threads of every side (--threads). With more than one, the ORT sides' idle threads do not spin (a side's
# spinning pool would take the cores from the side being timed) and times are wall-clock, not process CPU time.
THREADS = 1
UNCHECKED = ("floor",)  # sides timed without a correctness check (their outputs are not the model's)
Runner = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


def cpu_name() -> str:
    """The CPU model name with its family / model and vector ISA (``/proc/cpuinfo``), e.g. "AMD EPYC (family 25,
    model 1; avx2, no avx512)"; the platform's processor string elsewhere."""
    try:
        info: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
            if not line.strip():
                break
        flags = set(info.get("flags", "").split())
        isa = "avx512" if "avx512f" in flags else ("avx2, no avx512" if "avx2" in flags else "no avx2")
        if "avx512_vnni" in flags or "avx_vnni" in flags:
            isa += ", vnni"
        return f"{info['model name']} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}; {isa})"
    except (OSError, KeyError):
        return platform.processor() or "unknown"


def _options(optimize: bool = True) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if THREADS > 1:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def constant_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy without the graph inputs that are also initializers (published files list their weights as inputs)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name for t in out.graph.initializer}
    keep = [i for i in out.graph.input if i.name not in inits]
    del out.graph.input[:]
    out.graph.input.extend(keep)
    return out


def peer_base(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model the peers start from (see the module doc): constant weights, canonical domains, no channels_last."""
    m = rewrite_channels_last(fix_declared_types(fix_legacy_domains(constant_weights(model))))
    m.ir_version = min(m.ir_version, 10)
    return m


def _consumers(graph: onnx.GraphProto, name: str) -> list[onnx.NodeProto]:
    return [n for n in graph.node if name in n.input]


def constant_nodes_to_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with every ``Constant`` node holding a tensor (``value``) made an initializer (QuantToQCDQ writes the
    scales and zero points as Constant nodes)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = []
    for n in out.graph.node:
        attrs = {a.name: a for a in n.attribute}
        if n.domain in ("", "ai.onnx") and n.op_type == "Constant" and set(attrs) == {"value"}:
            t = onnx.TensorProto()
            t.CopyFrom(attrs["value"].t)
            t.name = n.output[0]
            out.graph.initializer.append(t)
        else:
            kept.append(n)
    del out.graph.node[:]
    out.graph.node.extend(kept)
    return out


def fold_weight_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """QuantizeLinear [-> Clip] chains on constant inputs replaced by integer initializers of their output.

    The values come from onnxruntime (one session over those nodes, optimizations off), so the initializer holds
    exactly what the chain computes.
    """
    model = constant_nodes_to_initializers(model)
    g = model.graph
    consts = {t.name for t in g.initializer}
    outputs = {o.name for o in g.output}
    chains: list[list[onnx.NodeProto]] = []
    for n in g.node:
        if n.domain in ("", "ai.onnx") and n.op_type == "QuantizeLinear" and all(i in consts for i in n.input if i):
            chain = [n]
            users = _consumers(g, n.output[0])
            if (
                len(users) == 1
                and users[0].op_type == "Clip"
                and all(i in consts for i in users[0].input[1:] if i)
                and n.output[0] not in outputs
            ):
                chain.append(users[0])
            chains.append(chain)
    if not chains:
        return model
    nodes = [n for c in chains for n in c]
    needed = {i for n in nodes for i in n.input if i}
    sub = helper.make_model(
        helper.make_graph(
            nodes,
            "fold",
            [],
            [helper.make_empty_tensor_value_info(c[-1].output[0]) for c in chains],
            initializer=[t for t in g.initializer if t.name in needed],
        ),
        opset_imports=list(model.opset_import),
    )
    sub.ir_version = 10
    sess = ort.InferenceSession(sub.SerializeToString(), _options(False), providers=["CPUExecutionProvider"])
    values = sess.run([c[-1].output[0] for c in chains], {})
    out = onnx.ModelProto()
    out.CopyFrom(model)
    drop = {n.output[0] for n in nodes}
    kept = [n for n in out.graph.node if n.output[0] not in drop]
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(
        numpy_helper.from_array(v, c[-1].output[0]) for c, v in zip(chains, values, strict=True)
    )
    used = {i for n in out.graph.node for i in n.input}
    inits = [t for t in out.graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(inits)
    return out


def fold_constant_quantizers(model: onnx.ModelProto) -> onnx.ModelProto:
    """QONNX nodes left after QuantToQCDQ whose inputs derive from constants only (bias quantizers with a bit width
    computed by Ceil/Log... nodes) replaced by float initializers of their output, computed by ortquant's op with
    the nodes they depend on in one session; nodes nobody reads any more are dropped."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    graph_inputs = {i.name for i in g.input}
    consts = {t.name for t in g.initializer}
    targets = [n for n in g.node if n.domain in QONNX_DOMAINS]
    cone: dict[int, onnx.NodeProto] = {}

    def constant(name: str) -> bool:
        if not name or name in consts:
            return True
        if name in graph_inputs or name not in producer:
            return False
        n = producer[name]
        if id(n) in cone:
            return True
        if all(constant(i) for i in n.input):
            cone[id(n)] = n
            return True
        return False

    targets = [n for n in targets if all(constant(i) for i in n.input) and len(n.output) == 1]
    if not targets:
        return model
    for n in targets:
        cone[id(n)] = n
    order = [n for n in g.node if id(n) in cone]
    needed = {i for n in order for i in n.input if i in consts}
    sub = helper.make_model(
        helper.make_graph(
            order,
            "fold",
            [],
            [helper.make_empty_tensor_value_info(n.output[0]) for n in targets],
            initializer=[t for t in g.initializer if t.name in needed],
        ),
        opset_imports=list(model.opset_import),
    )
    sub.ir_version = 10
    so = _options(False)
    ortquant.register(so)
    sess = ort.InferenceSession(sub.SerializeToString(), so, providers=["CPUExecutionProvider"])
    values = sess.run([n.output[0] for n in targets], {})
    out = onnx.ModelProto()
    out.CopyFrom(model)
    folded = {n.output[0] for n in targets}
    nodes = [n for n in out.graph.node if n.output[0] not in folded]
    while True:  # drop what only the folded nodes read
        used = {i for n in nodes for i in n.input} | {o.name for o in out.graph.output}
        live = [n for n in nodes if any(o in used for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(numpy_helper.from_array(v, n.output[0]) for n, v in zip(targets, values, strict=True))
    return out


def float_network(base: onnx.ModelProto) -> onnx.ModelProto:
    """The float side's model (module doc): dequantized weights, activation quantizers deleted."""
    return pure_float(ortquant.prepare_model(base))


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


_QONNX_SCRIPT = """
import sys
import numpy as np
import onnx
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.transformation.infer_shapes import InferShapes
m = onnx.load(sys.argv[1])
m.ir_version = 10
w = ModelWrapper(m).transform(InferShapes())
feeds = dict(np.load(sys.argv[2]))
out = execute_onnx(w, feeds)
np.savez(sys.argv[3], **{o.name: out[o.name] for o in w.graph.output})
"""


def reference(path: Path, model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]:
    """(inputs, outputs, source) of qonnx's executor on one batch-1 sample (module doc)."""
    npz = path.with_suffix(".npz")
    names_in = [i.name for i in _real_inputs(model)]
    names_out = [o.name for o in model.graph.output]
    if npz.exists():
        data = np.load(npz)
        if all(f"in:{n}" in data for n in names_in):
            return ({n: data[f"in:{n}"] for n in names_in}, {n: data[f"out:{n}"] for n in names_out}, npz.name)
        for key in ("b4", "b1"):  # models/: several distinct samples where there are
            if f"input_{key}" in data and len(names_in) == 1 and len(names_out) == 1:
                return ({names_in[0]: data[f"input_{key}"]}, {names_out[0]: data[f"output_{key}"]}, npz.name)
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in _real_inputs(model):
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        src, inp, dst = Path(tmp) / "m.onnx", Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        onnx.save(peer_base(model), str(src))
        np.savez(inp, **feeds)
        r = subprocess.run([sys.executable, "-c", _QONNX_SCRIPT, str(src), str(inp), str(dst)], capture_output=True,
                           text=True)  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"qonnx could not run {path}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        return feeds, dict(np.load(dst)), "qonnx execute_onnx (run here)"


def compare(got: list[np.ndarray], want: list[np.ndarray], max_mismatch: float) -> tuple[bool, float, float, str]:
    """(correct, mismatch fraction, max abs error, why not) of a side's outputs against the reference."""
    worst, mism, total, why = 0.0, 0, 0, ""
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return False, 1.0, float("inf"), f"output shape {list(g.shape)}, expected {list(w.shape)}"
        d = np.abs(g - w)
        d[np.isnan(g) & np.isnan(w)] = 0.0
        d[np.isnan(d)] = np.inf
        tol = 1e-5 * float(np.max(np.abs(w))) if w.size else 0.0
        worst = max(worst, float(d.max()) if d.size else 0.0)
        mism += int(np.count_nonzero(d > tol))
        total += d.size
        if w.ndim == 2 and w.shape[1] > 1:
            bad = int(np.count_nonzero(np.argmax(g, axis=1) != np.argmax(w, axis=1)))
            if bad:
                why = f"argmax differs on {bad} of {w.shape[0]} rows"
    frac = mism / total if total else 0.0
    if not why and frac > max_mismatch:
        why = f"{100 * frac:.1f}% of output elements off by more than 1e-5*max|ref| (max abs error {worst:.3g})"
    return not why, frac, worst, why


def _ort_runner(sess: ort.InferenceSession) -> Runner:
    names = [o.name for o in sess.get_outputs()]
    return lambda feeds: sess.run(names, feeds)


def _openvino_runner(model: onnx.ModelProto) -> Runner:
    import openvino as ov

    core = ov.Core()
    ov_model = core.read_model(model.SerializeToString(), b"")
    compiled = core.compile_model(
        ov_model,
        "CPU",
        {
            "INFERENCE_NUM_THREADS": THREADS,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32",
        },
    )
    request = compiled.create_infer_request()
    outs = [o.name for o in model.graph.output]
    ports = list(compiled.outputs)

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        res = request.infer(feeds)
        by_name = {p.get_any_name(): res[p] for p in ports}
        return [np.asarray(by_name.get(n, res[ports[i]])) for i, n in enumerate(outs)]

    return run


def build_sides(path: Path, model: onnx.ModelProto) -> dict[str, tuple[Runner | None, str | None]]:
    """Every side's runner, or None and the error that kept it from being made."""
    sides: dict[str, tuple[Runner | None, str | None]] = {}

    def attempt(name: str, make: Callable[[], Runner]) -> None:
        try:
            sides[name] = (make(), None)
        except Exception as e:
            sides[name] = (None, f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")

    attempt("ortquant-integer", lambda: _ort_runner(ortquant.InferenceSession(str(path), _options(), integer=True)))
    attempt("ortquant-default", lambda: _ort_runner(ortquant.InferenceSession(str(path), _options())))
    base = peer_base(model)
    q = qcdq(base)
    qi: onnx.ModelProto | None = None
    q_err = "qonnx's QuantToQCDQ failed on this model"
    if q is not None:
        try:
            q = fold_constant_quantizers(constant_nodes_to_initializers(q))
            left = sorted({n.op_type for n in q.graph.node if n.domain in QONNX_DOMAINS})
            if left:
                q_err = f"QuantToQCDQ left {left} (e.g. bit widths outside 2..8): no stock QCDQ form"
            else:
                qi = fold_weight_qdq(q)
        except Exception as e:  # the converted model is one onnxruntime refuses (e.g. float64 scales)
            q, qi = None, None
            q_err = f"QCDQ form not runnable: {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"

    def stock(m: onnx.ModelProto | None, optimize: bool) -> Runner:
        if m is None:
            raise RuntimeError(q_err)
        return _ort_runner(ort.InferenceSession(m.SerializeToString(), _options(optimize), ["CPUExecutionProvider"]))

    attempt("ort-qcdq", lambda: stock(qi, True))
    attempt("ort-qcdq-unfused", lambda: stock(qi, False))

    def openvino() -> Runner:
        if qi is None:
            raise RuntimeError(q_err)
        return _openvino_runner(qi)

    attempt("openvino-int8", openvino)

    def openvino_qcdq() -> Runner:
        if q is None or qi is None:
            raise RuntimeError(q_err)
        return _openvino_runner(q)

    attempt("openvino-qcdq", openvino_qcdq)

    def float_side() -> Runner:
        f = float_network(base)
        if any(n.domain not in ("", "ai.onnx") for n in f.graph.node):
            return _ort_runner(ortquant.InferenceSession(f, _options()))
        return _ort_runner(ort.InferenceSession(f.SerializeToString(), _options(), ["CPUExecutionProvider"]))

    attempt("float", float_side)

    def floor_side() -> Runner:
        inputs = _real_inputs(base)
        nodes = [helper.make_node("Identity", [i.name], [f"{i.name}__floor"]) for i in inputs]
        outs = [helper.make_empty_tensor_value_info(n.output[0]) for n in nodes]
        g = helper.make_graph(nodes, "floor", list(inputs), outs)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 10
        return _ort_runner(ort.InferenceSession(m.SerializeToString(), _options(), ["CPUExecutionProvider"]))

    attempt("floor", floor_side)
    return sides


def lowered_layers(path: Path, model: onnx.ModelProto) -> str:
    """ "k/n": the Conv / ConvTranspose / MatMul / Gemm layers of the model integer mode put on the integer path."""
    layer_domains = ("", "ai.onnx", "qonnx.custom_op.channels_last")
    n = sum(1 for x in model.graph.node if x.domain in layer_domains and x.op_type in LAYER_OPS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = ortquant.prepare_model(str(path), integer=True)
    except Exception as e:
        return f"?/{n} ({type(e).__name__})"
    ops = ("QConv", "QConvCodes", "QGemm", "QGemmCodes", "Rescale")
    k = sum(1 for x in unchain(m) if x.domain == "ortquant.integer" and x.op_type in ops)
    return f"{k}/{n}"


def layer_macs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> int | None:
    """Multiply-adds of the model's Conv / ConvTranspose / MatMul / Gemm layers for ``feeds`` (shapes by onnx
    inference with ortquant's schemas, the inputs' shapes fixed to the feeds'); None when a shape is unknown."""
    from ortquant.schemas import register_schemas

    register_schemas()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i in m.graph.input:
        if i.name in feeds:
            dims = i.type.tensor_type.shape.dim
            del dims[:]
            for d in feeds[i.name].shape:
                dims.add().dim_value = int(d)
    m = rewrite_channels_last(fix_legacy_domains(m))
    imported = {o.domain for o in m.opset_import}
    for domain in sorted({n.domain for n in m.graph.node} - imported - {"ai.onnx"}):
        m.opset_import.add(domain=domain, version=1)  # some exports use a domain without importing it
    try:
        g = onnx.shape_inference.infer_shapes(m, strict_mode=False).graph
    except Exception:
        return None
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
              for v in [*g.input, *g.value_info, *g.output]}  # fmt: skip
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    total = 0
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or n.op_type not in LAYER_OPS:
            continue
        x, w, y = shapes.get(n.input[0]), shapes.get(n.input[1]), shapes.get(n.output[0])
        if not x or not w or not y or None in x or None in w or None in y:
            return None
        if n.op_type == "Conv":  # y [N, M, ...] from w [M, C/group, k...]
            total += int(np.prod(y)) * int(np.prod(w[1:]))
        elif n.op_type == "ConvTranspose":  # every input element meets every weight of its group
            total += int(np.prod(x)) * int(np.prod(w[1:]))
        else:  # MatMul / Gemm: y [..., M, N], reduction length from the first operand
            trans_a = any(a.name == "transA" and a.i for a in n.attribute)
            total += int(np.prod(y)) * int(x[-2] if trans_a else x[-1])
    return total


def _tile(a: np.ndarray, batch: int) -> np.ndarray:
    """``batch`` rows cycling through the reference's samples (axis 0)."""
    return np.ascontiguousarray(a[np.arange(batch) % a.shape[0]])


def bench_model(path: Path, batches: list[int], samples: int, max_mismatch: float) -> list[dict[str, Any]]:
    """One result object per batch for the model at ``path``."""
    model = onnx.load(str(path))
    feeds1, want1, source = reference(path, model)
    sides = build_sides(path, model)
    lowered = lowered_layers(path, model)
    results = []
    fixed = [i.name for i in _real_inputs(model) if (d := i.type.tensor_type.shape.dim) and d[0].dim_value == 1]
    if fixed and any(b != 1 for b in batches):
        print(f"note: {path.name} fixes batch 1 on input {fixed[0]!r}: batch 1 only", flush=True)
        batches = [1]
    for batch in batches:
        feeds = {k: _tile(v, batch) for k, v in feeds1.items()}
        want = [_tile(want1[o.name], batch) for o in model.graph.output]
        entry: dict[str, dict[str, Any]] = {}
        timed: dict[str, Callable[[], object]] = {}
        for name in SIDES:
            run, err = sides[name]
            rec: dict[str, Any] = {"correct": False, "error": err, "median_cpu_us": None, "min_cpu_us": None,
                                   "ratio": None, "mismatch": None, "max_abs_err": None}  # fmt: skip
            if run is not None and name in UNCHECKED:
                rec["correct"] = None
                timed[name] = lambda run=run, feeds=feeds: run(feeds)
            elif run is not None:
                try:
                    ok, frac, worst, why = compare(run(feeds), want, max_mismatch)
                    rec.update(correct=ok, error=why or None, mismatch=frac, max_abs_err=worst)
                    timed[name] = lambda run=run, feeds=feeds: run(feeds)
                except Exception as e:
                    rec["error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
            entry[name] = rec
        if timed:
            clock = time.process_time if THREADS == 1 else time.perf_counter
            t0 = clock()
            for fn in timed.values():
                fn()
            one = (clock() - t0) / len(timed)
            inner = max(1, int(0.02 / max(one, 1e-6)))
            runs = [alternating_medians(list(timed.values()), samples, inner, now=clock) for _ in range(3)]
            for i, name in enumerate(timed):
                meds = [r[i] * 1e6 for r in runs]
                entry[name]["median_cpu_us"] = float(np.median(meds))
                entry[name]["min_cpu_us"] = float(min(meds))
        ref_us = entry["ortquant-integer"]["median_cpu_us"]
        for rec in entry.values():
            if rec["median_cpu_us"] is not None and ref_us:
                rec["ratio"] = rec["median_cpu_us"] / ref_us
        results.append({"model": str(path), "batch": batch, "threads": THREADS,
                        "clock": "cpu" if THREADS == 1 else "wall", "isa": ortquant.kernels.active_isa(),
                        "cpu": cpu_name(),
                        "reference": source, "lowered": lowered, "macs": layer_macs(model, feeds),
                        "sides": entry})  # fmt: skip
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    """One markdown row per model and batch: each side's median CPU us (ratio to integer mode), x when wrong."""
    print("| model | batch | lowered | " + " | ".join(SIDES) + " |")
    print("|---|---|---|" + "---|" * len(SIDES))
    for r in results:
        cells = []
        for name in SIDES:
            s = r["sides"][name]
            if s["median_cpu_us"] is None:
                cells.append("n/a")
            else:
                mark = "" if s["correct"] or name in UNCHECKED else " WRONG"
                ratio = f" ({s['ratio']:.2f}x)" if s["ratio"] is not None else ""
                cells.append(f"{s['median_cpu_us']:.0f}{ratio}{mark}")
        print(f"| {Path(r['model']).stem} | {r['batch']} | {r['lowered']} | " + " | ".join(cells) + " |")
    for r in results:
        for name in SIDES:
            s = r["sides"][name]
            if s["error"]:
                print(f"  {Path(r['model']).stem} b{r['batch']} {name}: {s['error']}")


def median_results(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Several runs' results (the same models and batches, in the same order) as one: per side the median of the
    times and ratios, correct only when every run was."""
    out = []
    for i, first in enumerate(runs[0]):
        merged = json.loads(json.dumps(first))
        for side, entry in merged["sides"].items():
            seen = [run[i]["sides"][side] for run in runs if i < len(run) and side in run[i]["sides"]]
            for key in ("ratio", "median_cpu_us"):
                vals = [v[key] for v in seen if v.get(key) is not None]
                entry[key] = statistics.median(vals) if vals else None
            entry["correct"] = None if side in UNCHECKED else all(v.get("correct") for v in seen)
        out.append(merged)
    return out


def summary_table(results: list[dict[str, Any]], cpu: str) -> str:
    """Markdown: one row per model and batch; integer mode's median CPU time and every other side's time as a ratio
    to it (above 1: integer mode is faster), "wrong" where the side disagrees with qonnx, "-" where it cannot run."""
    peers = [s for s in SIDES if s != "ortquant-integer"]
    lines = [
        "| workload | batch | layers lowered | ortquant-integer | integer GMAC/s | " + " | ".join(peers) + " | CPU |",
        "|---|---|---|---|---|" + "---|" * len(peers) + "---|",
    ]
    for r in results:
        sides = r["sides"]
        base = sides["ortquant-integer"]
        if base["median_cpu_us"] is None:
            head = "-"
        else:
            head = f"{base['median_cpu_us']:.0f} us" + ("" if base["correct"] else " (wrong)")
        cells = []
        for name in peers:
            x = sides[name]
            if x["ratio"] is None:
                cells.append("-" if x["median_cpu_us"] is None else f"{x['median_cpu_us']:.0f} us")
            else:
                wrong = not x["correct"] and name not in ("float", *UNCHECKED)  # the float network: not meant to match
                cells.append(f"{x['ratio']:.2f}x" + (" wrong" if wrong else ""))
        macs, us = r.get("macs"), base["median_cpu_us"]
        rate = f"{macs / us / 1e3:.1f}" if macs and us else "-"
        lines.append(f"| {Path(r['model']).stem} | {r['batch']} | {r.get('lowered', '?')} | {head} | {rate} | "
                     + " | ".join(cells) + f" | {cpu} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", type=Path, help="default: the summary table's models that are present")
    p.add_argument("--quick", action="store_true", help="a smoke run: batch 1, one sample per run, two models")
    p.add_argument("--batch", default="1,8", help="comma-separated batch sizes (default 1,8)")
    p.add_argument("--json", type=Path, help="write the results here (a list of objects, one per model and batch)")
    p.add_argument("--samples", type=int, default=7, help="samples per interleaved run (three runs)")
    p.add_argument("--max-mismatch", type=float, default=0.01, help="fraction of output elements allowed off")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of every side (default 1); above 1, "
                   "wall-clock times, idle threads not spinning (the *_cpu_us fields hold wall time)")  # fmt: skip
    p.add_argument("--summary", metavar="CPU", help="print only the summary table of the --json file (or of the JSON "
                   "files given as arguments: the median of each side over them), CPU named")  # fmt: skip
    args = p.parse_args(argv)
    if args.summary:
        files = ([args.json] if args.json else []) + list(args.models)
        if not files:
            p.error("--summary needs the JSON file(s) that --json wrote (--json FILE, or FILE ... as arguments)")
        try:
            runs = [json.loads(Path(f).read_text()) for f in files]
        except (OSError, ValueError) as e:
            p.error(f"--summary: cannot read a results file: {e}")
        print(summary_table(median_results(runs), args.summary))
        return 0
    if not args.models:
        args.models = [m for m in DEFAULT_MODELS if m.exists()][: 2 if args.quick else None]
    if args.quick:
        args.batch, args.samples = "1", 1
    batches = [int(b) for b in args.batch.split(",") if b]
    if args.threads < 1:
        p.error("--threads must be at least 1")
    global THREADS
    THREADS = args.threads
    how = "1 thread, CPU time" if THREADS == 1 else f"{THREADS} threads (no spinning), wall time"
    print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}, isa {ortquant.kernels.active_isa()}, "
          f"CPU {cpu_name()}, {how}", flush=True)  # fmt: skip
    results: list[dict[str, Any]] = []
    for path in args.models:
        try:
            res = bench_model(path, batches, args.samples, args.max_mismatch)
        except Exception as e:
            print(f"{path}: {type(e).__name__}: {e}", flush=True)
            continue
        print_table(res)
        sys.stdout.flush()
        results.extend(res)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    if len(args.models) > 1:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
