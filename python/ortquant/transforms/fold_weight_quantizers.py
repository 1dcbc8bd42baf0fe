"""Rewrite: QONNX quantizers whose inputs are all constant (weight quantizers) become initializers.

onnxruntime never constant-folds custom ops. ortquant computes such a node once at session creation, but
onnxruntime still copies its output out on every run, and since that output is no initializer, onnxruntime
cannot pre-pack the float Conv/Gemm weights behind it. Replacing the node by an initializer holding its output
removes both costs. The output is computed by ortquant's own op (one onnxruntime session over the foldable nodes,
with ortquant's ops registered), so the initializer is bit for bit what the node produces.

Not applied with ``exact=True``: onnxruntime's pre-packed float convolution may sum in another order than the
unpacked one qonnx's executor matches, which moves outputs by an ulp.

:func:`evaluate_nodes` is the evaluation both this transform and the integer lowering (which reads each weight
quantizer's output, one layer at a time) use: the first request for a model evaluates every foldable node of it in
one onnxruntime session and keeps the results, keyed by the node and the content of its inputs, so the lowering's
per-layer requests and the fold that follows cost one session per prepare, not one per weight quantizer.
"""

from __future__ import annotations

import hashlib
import threading

import onnx
from onnx import numpy_helper

from ortquant.transforms._util import QONNX_DOMAINS, all_nodes, copy_model

# The quantizer ops folded when every input is a constant initializer.
FOLDABLE = ("Quant", "IntQuant", "BipolarQuant", "Trunc", "TruncQuant", "FloatQuant")


def _constants(graph: onnx.GraphProto) -> set[str]:
    """Initializer names that are constant and held in the model: not also graph inputs (those can be overridden per
    run), and not stored as external data (a pure ModelProto transform cannot read the model's folder; such weights
    keep their quantizer node, which ortquant computes once at session creation)."""
    inputs = {i.name for i in graph.input}
    return {i.name for i in graph.initializer if i.name not in inputs and i.data_location != onnx.TensorProto.EXTERNAL}


def foldable_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The top-level QONNX quantizer nodes with only constant inputs and one output that is not a graph output."""
    graph = model.graph
    consts = _constants(graph)
    outputs = {o.name for o in graph.output}
    return [
        n
        for n in graph.node
        if n.domain in QONNX_DOMAINS
        and n.op_type in FOLDABLE
        and n.input
        and all(i and i in consts for i in n.input)
        and len(n.output) == 1
        and n.output[0] not in outputs
    ]


def _run_nodes(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> list[onnx.TensorProto]:
    """Run ``nodes`` (constant inputs only) through onnxruntime with ortquant's ops; their outputs as tensors."""
    import onnxruntime as ort

    from ortquant._library import register

    needed = {i for n in nodes for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in needed]
    outs = [onnx.helper.make_empty_tensor_value_info(n.output[0]) for n in nodes]
    graph = onnx.helper.make_graph(list(nodes), "fold_weight_quantizers", [], outs, initializer=inits)
    sub = onnx.helper.make_model(graph, opset_imports=list(model.opset_import))
    sub.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 4  # errors are raised (and reported) by the caller, not logged twice
    so.intra_op_num_threads = 1
    register(so)
    sess = ort.InferenceSession(sub.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    values = sess.run([n.output[0] for n in nodes], {})
    return [numpy_helper.from_array(v, name=n.output[0]) for n, v in zip(nodes, values, strict=True)]


# The results of the last batch evaluation: fingerprint (see _fingerprint) -> output tensor. Replaced as a whole by
# the next batch, so it holds at most one model's quantized weights; batches above _CACHE_LIMIT bytes are not kept.
_cache: dict[bytes, onnx.TensorProto] = {}
_cache_lock = threading.Lock()
_CACHE_LIMIT = 512 << 20


def clear_cache() -> None:
    """Forget the kept weight-quantizer outputs (they are recomputed on the next request)."""
    global _cache
    with _cache_lock:
        _cache = {}


def _fingerprint(model: onnx.ModelProto, node: onnx.NodeProto, tensors: dict[str, onnx.TensorProto]) -> bytes | None:
    """A digest of everything the node's output depends on: the node (op, domain, attributes, names), the opset
    the model imports for its domain (Trunc v1 and v2 differ) and each input tensor (name, type, shape, data);
    None when an input is not one of ``tensors``."""
    h = hashlib.blake2b(digest_size=24)
    h.update(node.SerializeToString())
    version = next((o.version for o in model.opset_import if o.domain == node.domain), -1)
    h.update(version.to_bytes(8, "little", signed=True))
    for name in node.input:
        t = tensors.get(name)
        if t is None:
            return None
        data = t.SerializeToString()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def evaluate_nodes(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> list[onnx.TensorProto]:
    """The outputs of ``nodes`` (QONNX quantizers on constant initializers) as tensors named after them, computed by
    ortquant's ops in onnxruntime, bit for bit what the nodes return.

    The results are kept: on a request for a node not evaluated yet, every foldable node
    of ``model`` (:func:`foldable_nodes`) is evaluated with it in one session and kept; later requests for any of
    them, in this model or in a copy (the same node on the same input values), cost a lookup.

    Errors stay per node: when the batch cannot be evaluated (one node's bad parameters), only ``nodes`` are
    evaluated, and an error names one of them. The returned tensors are shared: callers copy, not modify, them.
    """
    global _cache
    tensors = {t.name: t for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL}
    keys = [_fingerprint(model, n, tensors) for n in nodes]
    if any(k is None for k in keys):
        return _run_nodes(model, nodes)
    cache = _cache
    if all(k in cache for k in keys):
        return [cache[k] for k in keys]  # type: ignore[index]
    batch = {k: n for k, n in zip(keys, nodes, strict=True)}
    for n in foldable_nodes(model):
        k = _fingerprint(model, n, tensors)
        if k is not None:
            batch.setdefault(k, n)
    try:
        values = _run_nodes(model, list(batch.values()))
    except Exception:  # evaluate what was asked alone, so that its error (if any) names one of its nodes
        return _run_nodes(model, nodes)
    fresh = dict(zip(batch, values, strict=True))
    if sum(t.ByteSize() for t in values) <= _CACHE_LIMIT:
        with _cache_lock:
            _cache = fresh
    return [fresh[k] for k in keys]  # type: ignore[index]


def fold_weight_quantizers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace every constant-input QONNX quantizer (see :func:`foldable_nodes`) by an initializer of its output.

    Initializers no longer used by any node are dropped. Returns ``model`` itself when there is nothing to fold.
    Errors of the op (bad attributes, bad parameter values) surface here as onnxruntime errors naming the node.
    """
    nodes = foldable_nodes(model)
    if not nodes:
        return model
    tensors = evaluate_nodes(model, nodes)
    out = copy_model(model)
    folded = {n.output[0] for n in nodes}
    kept = [n for n in out.graph.node if not (len(n.output) == 1 and n.output[0] in folded)]
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(tensors)
    used = {i for n in all_nodes(out.graph) for i in n.input} | {o.name for o in out.graph.output}
    keep_inits = [t for t in out.graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(keep_inits)
    vis = [v for v in out.graph.value_info if v.name not in folded]
    del out.graph.value_info[:]
    out.graph.value_info.extend(vis)
    return out
