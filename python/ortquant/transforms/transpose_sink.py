"""Rewrite: a Transpose is moved down past per-element ops, nearest-neighbour ``Resize`` and ``Concat`` until it meets
its inverse, where both go.

Channels-last exports (hls4ml / QKeras via qonnx) put a ``Transpose`` to channels-last after every layer and one
back before the next; ``rewrite_channels_last`` keeps that form and ``cancel_transpose_pairs`` removes a pair only
around a single chain of per-element ops. A U-Net's skip connection (a value read by the next layer and by a later
``Concat``) and its upsampling (``Resize`` in channels-last, then ``Concat`` on the last axis) keep theirs: a fifth of
exm_tiny_unet's time was Transposes. The rules, each moving values without changing one (so the result is the same
bits), applied until none matches:

- ``Transpose(p)`` read by one node, a per-element op (``transpose_pairs``' list: QONNX quantizers with one-element
  parameters, Relu, LeakyRelu, Clip ...): the op reads the Transpose's input and the Transpose moves after it;
- ``Transpose(p)`` read by one node, a ``Resize`` with ``mode`` nearest, no roi, constant ``scales`` (or ``sizes``)
  and no ``axes``: the Resize runs on the Transpose's input with its scales (sizes) permuted, the Transpose after it
  (nearest-neighbour resizing picks each element per axis: it moves values, like the Transpose);
- a ``Concat`` whose inputs are all outputs of ``Transpose(p)`` nodes read by it alone: it concatenates their
  inputs on axis ``p[axis]``, one ``Transpose(p)`` after it;
- a ``Transpose(q)`` reading the output of ``Transpose(p)`` with ``q`` undoing ``p``: its readers read the first
  one's input (the second Transpose goes; the first too when nothing else reads it).

Every node moved, rewritten or removed must be valid at the model's opset (onnxruntime would refuse a malformed one:
it is left in place for it to do so). A Transpose whose output is a graph output stays where it is. Values keep
their names and layouts (a moved Transpose writes the old name; the op before it writes a new value), so no declared
shape changes. Returns ``model`` itself unless the rewrite leaves fewer Transposes (one only moved towards the
outputs is no gain).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, copy_model
from ortquant.transforms.transpose_pairs import _per_element, _perm


def _consts(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    inputs = {i.name for i in graph.input}
    return {t.name: t for t in graph.initializer if t.name not in inputs}


def _is_inverse(p: list[int], q: list[int]) -> bool:
    return len(p) == len(q) and [p[i] for i in q] == list(range(len(p)))


def _attr(node: onnx.NodeProto, name: str) -> object:
    a = next((a for a in node.attribute if a.name == name), None)
    return None if a is None else helper.get_attribute_value(a)


def _resize_params(node: onnx.NodeProto, consts: dict[str, onnx.TensorProto], rank: int) -> tuple[int, np.ndarray]:
    """(index, values) of a nearest Resize's constant scales (2) or sizes (3) when the rule applies; (-1, empty)
    otherwise."""
    none = (-1, np.zeros(0))
    if node.domain not in STANDARD_DOMAINS or node.op_type != "Resize" or len(node.output) != 1:
        return none
    if _attr(node, "mode") not in (None, b"nearest") or _attr(node, "axes") is not None:
        return none
    ins = list(node.input) + [""] * (4 - len(node.input))
    roi = ins[1]
    if roi and (roi not in consts or _read.tensor_array(consts[roi], node, "roi").size != 0):
        return none
    for k in (2, 3):
        name = ins[k]
        if not name:
            continue
        if name not in consts:
            return none
        v = _read.tensor_array(consts[name], node, "scales" if k == 2 else "sizes")
        if v.size == 0:
            continue
        if v.ndim != 1 or v.size != rank:
            return none
        other = ins[5 - k]  # the other of scales / sizes must be absent or empty
        what = "scales" if k == 3 else "sizes"
        if other and (other not in consts or _read.tensor_array(consts[other], node, what).size != 0):
            return none
        return k, v
    return none


def _rewrite_once(model: onnx.ModelProto, fresh: Callable[[str], str]) -> bool:
    g = model.graph
    nodes = list(g.node)
    consts = _consts(g)
    outputs = {o.name for o in g.output}
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for v in dict.fromkeys(n.input):
            if v:
                readers.setdefault(v, []).append(i)

    valid: dict[int, bool] = {}

    def ok(i: int) -> bool:
        """A standard node this step moves, rewrites or removes must be one onnxruntime would accept (it never
        sees it as written); the QONNX quantizers have kernels of their own, which check them."""
        if i not in valid:
            n = nodes[i]
            valid[i] = n.domain not in STANDARD_DOMAINS or _read.standard_node_problem(n, model) is None
        return valid[i]

    def transpose(i: int) -> list[int] | None:
        return _perm(nodes[i]) if nodes[i].op_type == "Transpose" and ok(i) else None

    def only_reader(value: str) -> int | None:
        rs = readers.get(value, [])
        return rs[0] if len(rs) == 1 and value not in outputs else None

    def replace(new_nodes: list[onnx.NodeProto]) -> bool:
        live = [n for n in new_nodes if n is not None]
        del g.node[:]
        g.node.extend(live)
        return True

    for i, t in enumerate(nodes):
        p = transpose(i)
        if p is None:
            continue
        a, b = t.input[0], t.output[0]
        # Its inverse among its readers: they read a.
        for j in readers.get(b, []):
            q = transpose(j)
            if q is not None and _is_inverse(p, q) and nodes[j].output[0] not in outputs:
                inv_out = nodes[j].output[0]
                for n in nodes:
                    n.input[:] = [a if v == inv_out else v for v in n.input]
                new = list(nodes)
                new[j] = None  # type: ignore[call-overload]
                if readers.get(b, []) == [j] and b not in outputs:
                    new[i] = None  # type: ignore[call-overload]
                return replace(new)
        j = only_reader(b)
        if j is None:
            continue
        n = nodes[j]
        if not ok(j):
            continue
        if n.input[0] == b and b not in n.input[1:] and (_per_element(n, consts) or n.op_type == "Resize"):
            if n.op_type == "Resize":
                k, vals = _resize_params(n, consts, len(p))
                if k < 0:
                    continue
                permuted = np.empty_like(vals)
                permuted[p] = vals  # the value for b's axis i belongs to a's axis p[i]
                name = fresh(n.input[k])
                g.initializer.append(numpy_helper.from_array(permuted, name))
                n.input[k] = name
            c = n.output[0]
            c2 = fresh(c)
            n.input[0] = a
            n.output[0] = c2
            moved = helper.make_node("Transpose", [c2], [c], name=fresh(t.name or b), perm=p)
            new = list(nodes)
            new[i] = None  # type: ignore[call-overload]
            new.insert(j + 1, moved)
            return replace(new)
    # Concat of Transpose(p) outputs read by it alone.
    for j, n in enumerate(nodes):
        if n.domain not in STANDARD_DOMAINS or n.op_type != "Concat" or len(n.output) != 1 or not n.input:
            continue
        if not ok(j):
            continue
        srcs = [producer.get(v) for v in n.input]
        if any(s is None for s in srcs):
            continue
        perms = [transpose(s) for s in srcs]  # type: ignore[arg-type]
        p = perms[0]
        if p is None or any(q != p for q in perms) or any(only_reader(v) != j for v in n.input):
            continue
        axis = _attr(n, "axis")
        if not isinstance(axis, int) or not -len(p) <= axis < len(p):
            continue
        axis %= len(p)
        c = n.output[0]
        c2 = fresh(c)
        n.input[:] = [nodes[s].input[0] for s in srcs]  # type: ignore[index]
        del n.attribute[:]
        n.attribute.append(helper.make_attribute("axis", p[axis]))
        n.output[0] = c2
        moved = helper.make_node("Transpose", [c2], [c], name=fresh((n.name or c) + "__transpose"), perm=p)
        new = list(nodes)
        for s in set(srcs):
            new[s] = None  # type: ignore[call-overload]
        new.insert(j + 1, moved)
        return replace(new)
    return False


def sink_transposes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move Transposes down past per-element ops, nearest Resize and Concat to their inverse (module doc); ``model``
    itself when nothing moves."""
    if not any(n.op_type == "Transpose" and n.domain in STANDARD_DOMAINS for n in model.graph.node):
        return model
    out = copy_model(model)
    used = {v for n in out.graph.node for v in [*n.input, *n.output, n.name]}
    used |= {t.name for t in out.graph.initializer} | {i.name for i in out.graph.input}

    def fresh(base: str) -> str:
        k = 0
        while f"{base}__sunk{k}" in used:
            k += 1
        name = f"{base}__sunk{k}"
        used.add(name)
        return name

    for _ in range(100_000):  # each rewrite moves a Transpose later or removes one: this ends long before
        if not _rewrite_once(out, fresh):
            break

    def count(m: onnx.ModelProto) -> int:
        return sum(n.op_type == "Transpose" and n.domain in STANDARD_DOMAINS for n in m.graph.node)

    return out if count(out) < count(model) else model  # moved without meeting an inverse: not worth a change


__all__ = ["sink_transposes"]
