"""Rewrite: a Transpose and its inverse around a chain of per-element ops are removed.

``Transpose(p) -> E1 -> ... -> Ek -> Transpose(q)`` where ``q`` undoes ``p`` and every ``Ei`` computes each output
element from the input element at the same position only (with parameters that are one value for the whole
tensor) becomes ``E1 -> ... -> Ek``: moving the values and applying the ops commute, so the result is the same bits.
This is what the channels-last rewrite (``transforms/channels_last.py``) leaves between two rewritten layers of a
channels-last export (hls4ml / QKeras via qonnx): ``Conv -> Transpose(to last) -> Quant -> Transpose(to first) ->
Conv``. onnxruntime's own transpose optimizer cancels such pairs around its standard ops but not around custom ops
such as QONNX's ``Quant``, so without this rewrite every layer moves its whole activation twice (a quarter of the
time of a 512x512 channels-last network); with it, integer mode also sees the activation quantizer right before
the layer and fuses it.

Per-element ops taken: ``Quant`` / ``IntQuant`` / ``BipolarQuant`` / ``Trunc`` (QONNX domains) whose parameter inputs
are constants of one element, and the standard ``Relu``, ``LeakyRelu``, ``Clip`` (scalar bounds by its definition),
``Identity``, ``Neg``, ``Abs``, ``Floor``, ``Ceil``, ``Round``, ``Sigmoid``, ``Tanh``. Each value inside the chain must
be read by the next node only and must not be a graph output; the Transposes must have a ``perm`` attribute. The
declared shapes of the chain's values (``value_info``) are dropped (they change with the layout). Returns ``model``
itself when nothing matches.
"""

from __future__ import annotations

import onnx

from ortquant.transforms import _read
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS, ModelError, copy_model

_STANDARD_UNARY = ("Relu", "LeakyRelu", "Identity", "Neg", "Abs", "Floor", "Ceil", "Round", "Sigmoid", "Tanh")
_QONNX_ELEMENTWISE = ("Quant", "IntQuant", "BipolarQuant", "Trunc")


def _perm(node: onnx.NodeProto) -> list[int] | None:
    if node.domain not in STANDARD_DOMAINS or node.op_type != "Transpose" or len(node.input) != 1:
        return None
    if len(node.output) != 1 or not node.input[0] or not node.output[0]:
        return None
    try:
        p = _read.attr_ints(node, "perm", None)
    except ModelError:
        return None
    if p is None or sorted(p) != list(range(len(p))):
        return None
    return list(p)


def _one_element(model_consts: dict[str, onnx.TensorProto], name: str) -> bool:
    t = model_consts.get(name)
    if t is None:
        return False
    n = 1
    for d in t.dims:
        n *= int(d)
    return n == 1


def _per_element(node: onnx.NodeProto, consts: dict[str, onnx.TensorProto]) -> bool:
    """``node`` computes each element of its one output from the element of input 0 at the same position."""
    if len(node.output) != 1 or not node.output[0] or not node.input or not node.input[0]:
        return False
    if node.domain in STANDARD_DOMAINS:
        if node.op_type in _STANDARD_UNARY:
            return len(node.input) == 1
        if node.op_type == "Clip":  # min / max are scalars (opset 11+) or attributes (opset 6)
            return all(not i or _one_element(consts, i) for i in node.input[1:])
        return False
    if node.domain in QONNX_DOMAINS and node.op_type in _QONNX_ELEMENTWISE:
        return len(node.input) >= 2 and all(i and _one_element(consts, i) for i in node.input[1:])
    return False


def cancel_transpose_pairs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Remove each ``Transpose -> per-element ops -> inverse Transpose`` pair (module doc); ``model`` itself when
    there is none."""
    graph = model.graph
    inputs = {i.name for i in graph.input}
    consts = {t.name: t for t in graph.initializer if t.name not in inputs}
    for n in graph.node:
        if n.domain in STANDARD_DOMAINS and n.op_type == "Constant" and len(n.output) == 1:
            v = next((a.t for a in n.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
            if v is not None:
                consts[n.output[0]] = v
    consumers: dict[str, list[int]] = {}
    for k, n in enumerate(graph.node):
        for i in n.input:
            if i:
                consumers.setdefault(i, []).append(k)
    outputs = {o.name for o in graph.output}

    def only_reader(value: str) -> int | None:
        readers = consumers.get(value, [])
        if value in outputs or len(readers) != 1:
            return None
        return readers[0]

    drop: set[int] = set()
    rewires: list[tuple[int, int, int]] = []  # (first Transpose, last op of the chain, inverse Transpose)
    dropped_values: set[str] = set()
    for a, node in enumerate(graph.node):
        p = _perm(node)
        if p is None or a in drop:
            continue
        chain: list[int] = []
        cur = node.output[0]
        while True:
            k = only_reader(cur)
            if k is None or k in drop:
                break
            nxt = graph.node[k]
            q = _perm(nxt)
            if q is not None:
                if chain and len(q) == len(p) and [p[i] for i in q] == list(range(len(p))):
                    drop.update((a, k))
                    rewires.append((a, chain[-1], k))
                    dropped_values.update(graph.node[c].output[0] for c in chain)
                break
            if nxt.input[0] != cur or not _per_element(nxt, consts) or cur in nxt.input[1:]:
                break
            chain.append(k)
            cur = nxt.output[0]
    if not rewires:
        return model
    out = copy_model(model)
    nodes = out.graph.node
    for a, last, b in rewires:
        first = consumers[nodes[a].output[0]][0]
        nodes[first].input[0] = nodes[a].input[0]
        nodes[last].output[0] = nodes[b].output[0]
    keep = [n for k, n in enumerate(nodes) if k not in drop]
    del out.graph.node[:]
    out.graph.node.extend(keep)
    kept_info = [vi for vi in out.graph.value_info if vi.name not in dropped_values]
    del out.graph.value_info[:]
    out.graph.value_info.extend(kept_info)
    return out
