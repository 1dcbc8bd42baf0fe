"""Integer-mode rule: a lowered layer (``QConv`` or ``QGemm``) whose output only such layers read, all with the same
input quantizer, writes their int8 codes instead of float32 values (``QConvCodes`` / ``QGemmCodes``)::

    QConv(...) -> y -> QConv(act_* = A), QGemm(act_* = A) ...
      =>  QConvCodes(..., out_act_* = A) -> c -> QConv(act_* = A), QGemm(act_* = A) ...
    QGemm(...) -> y -> QGemm(act_* = A) ...
      =>  QGemmCodes(..., out_act_* = A) -> c -> QGemm(act_* = A) ...

Each reader used to quantize ``y`` with its quantizer ``A`` (the first thing a QConv or QGemm does with a float32
input). ``QConvCodes`` computes the same float32 values (its rescale, Relu, fused pool, pixel shuffle or residual
unchanged) and applies ``A`` to them as it writes them, a piece of rows at a time from an L1 buffer; ``QGemmCodes``
does the same after QGemm's rescale and Relu (an MLP's hidden layers, a CNN's dense head behind its ``Flatten``). The
readers take the codes as they are. The codes are the ones the readers computed before, so every output keeps its
bits; what goes is a float32 tensor written and read back (four bytes an element instead of one) and a pass of the
readers.

A QONNX ``Quant`` reading a ``QConv``'s output directly is such a reader too when it is the readers' quantizer
and only QConv layers read its output, as their residual ``R`` (Brevitas' residual block): it goes, and those layers
read the codes as ``R`` with ``residual_act_*`` (the op adds ``float32((c + offset) * scale)``, what Quant output).
A ``QGemm`` producer has no such readers (QGemm has no ``R``).

Fused only when: the producer is a ``QConv`` or ``QGemm`` of domain ``ortquant.integer``; every reader of its output
reads it as its input ``X`` (not as the residual ``R``) and is a ``QConv`` or ``QGemm`` of that domain, directly or
through ``Squeeze``, ``Unsqueeze``, ``Reshape`` or ``Flatten`` nodes (a 1-D layer's pair, the Flatten before a dense
head; they move int8 elements as they moved float32 ones); no value on the way is a graph output; the readers' act_*
attributes are equal (defaults filled in), of at most 8 bits (a 9- to 16-bit quantizer has no int8 codes); and no
reader is a binary-weight layer that may take the bit kernels (weight codes all -1 or +1 with ``xnor`` on: those read
float32 values). The values that hold codes are renamed (``<name>__codes``) and their float32 ``value_info`` is
dropped. Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms._integer_common import SkipError
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS, copy_model, input_readers, set_nodes
from ortquant.transforms.lower_integer import _activation, _Graph

INTEGER_DOMAIN = "ortquant.integer"
# Nodes that only move or reshape elements (any element type): codes pass through them unchanged.
_SHAPE_OPS = ("Squeeze", "Unsqueeze", "Reshape", "Flatten")
# The layers that read codes as X and may write them: op type -> the op that writes the readers' codes instead.
_LAYERS = {"QConv": "QConvCodes", "QGemm": "QGemmCodes"}
# The act_* attributes and their defaults (schemas/integer.py); act_bits defaults to 1 for a bipolar quantizer.
_ACT_DEFAULTS: dict[str, object] = {
    "act_scale": None,
    "act_zeropt": 0.0,
    "act_bits": None,
    "act_signed": 1,
    "act_narrow": 0,
    "act_rounding_mode": "ROUND",
    "act_bipolar": 0,
}


def _act(node: onnx.NodeProto) -> dict[str, object]:
    """The node's act_* attribute values with the defaults filled in."""
    given = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in _ACT_DEFAULTS}
    out = {k: given.get(k, d) for k, d in _ACT_DEFAULTS.items()}
    if any(a.name == "act_channel_scales" for a in node.attribute):
        out["act_scale"] = None  # one quantizer per channel: no single quantizer whose codes a producer could write
    if out["act_bits"] is None:
        out["act_bits"] = 1 if out["act_bipolar"] else 8
    return out


def _canonical(act: dict[str, object]) -> dict[str, object]:
    """act_* values in one form (floats, ints, the rounding mode's name upper-case; a bipolar quantizer by its scale
    alone), so that a layer's attributes and a Quant node's parameters compare equal when they are one quantizer."""
    if act.get("act_bipolar"):
        return {**_ACT_DEFAULTS, "act_scale": act["act_scale"], "act_bits": 1, "act_bipolar": 1}
    mode = act["act_rounding_mode"]
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    return {
        "act_scale": None if act["act_scale"] is None else float(np.float32(act["act_scale"])),  # type: ignore[arg-type]
        "act_zeropt": float(act["act_zeropt"]),  # type: ignore[arg-type]
        "act_bits": int(act["act_bits"]),  # type: ignore[call-overload]
        "act_signed": int(act["act_signed"]),  # type: ignore[call-overload]
        "act_narrow": int(act["act_narrow"]),  # type: ignore[call-overload]
        "act_rounding_mode": mode.upper(),
        "act_bipolar": 0,
    }


def _binary_weights(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> bool:
    """True when the layer may take the bit kernels: xnor on (the default) and weight codes all -1 or +1 (or the
    weights are not a known initializer: then it is not fused either)."""
    xnor = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "xnor"), 1)
    if not xnor:
        return False
    w = inits.get(node.input[1]) if len(node.input) > 1 else None
    if w is None:
        return True
    codes = numpy_helper.to_array(w)
    return bool(codes.size) and bool(np.all(np.abs(codes.astype(np.int16)) == 1))


def fuse_integer_codes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Let each ``QConv`` / ``QGemm`` whose readers are all such layers with one quantizer write their codes; see the
    module doc."""
    nodes = list(model.graph.node)

    def is_qconv(n: onnx.NodeProto) -> bool:
        return n.op_type == "QConv" and n.domain == INTEGER_DOMAIN

    def is_layer(n: onnx.NodeProto) -> bool:
        return n.op_type in _LAYERS and n.domain == INTEGER_DOMAIN

    if sum(1 for n in nodes if is_layer(n)) < 2:
        return model
    readers = input_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}

    graph: _Graph | None = None

    def residual_quant(j: int) -> tuple[dict[str, object], list[int]] | None:
        """(its quantizer as act_* values, the layers reading its output as R) for a Quant node whose output only
        QConv layers read, as their residual R; None otherwise."""
        nonlocal graph
        q = nodes[j]
        if q.domain not in QONNX_DOMAINS or q.op_type not in ("Quant", "IntQuant", "BipolarQuant") or not q.output:
            return None
        v = q.output[0]
        rs = readers.get(v, [])
        if not v or v in outputs or not rs or any(k != 4 or not is_qconv(nodes[r]) for r, k in rs):
            return None
        if graph is None:
            graph = _Graph(model)
        try:
            act, x, chain, _ = _activation(graph, v)
        except (SkipError, ValueError):
            return None
        if chain or x != q.input[0]:
            return None
        return {**_ACT_DEFAULTS, "act_bits": 1 if act.get("act_bipolar") else 8, **act}, [r for r, _ in rs]

    quants: dict[int, tuple[dict[str, object], list[int]]] = {}  # Quant index -> (quantizer, R readers)

    def layer_readers(value: str, through: list[str], residual: bool) -> list[tuple[int, int]] | None:
        """The QConv / QGemm layers reading ``value`` as X, directly or through shape-only nodes (whose outputs are
        added to ``through``), and (k = -1; only with ``residual``) the Quant nodes reading it directly whose outputs
        the layers read only as R (residual_quant); None when another node or a graph output reads it."""
        if value in outputs:
            return None
        found: list[tuple[int, int]] = []
        for j, k in readers.get(value, []):
            r = nodes[j]
            if is_layer(r) and k == 0:
                found.append((j, k))
            elif residual and k == 0 and not through and (rq := residual_quant(j)) is not None:
                quants[j] = rq
                found.append((j, -1))
            elif r.op_type in _SHAPE_OPS and r.domain in STANDARD_DOMAINS and k == 0 and len(r.output) == 1:
                through.append(r.output[0])
                more = layer_readers(r.output[0], through, residual)
                if more is None:
                    return None
                found.extend(more)
            else:
                return None
        return found

    fused: dict[int, tuple[dict[str, object], list[int]]] = {}  # producer -> (the readers' act_*, residual Quants)
    stale: set[str] = set()
    for i, n in enumerate(nodes):
        if not is_layer(n) or not n.output or not n.output[0]:
            continue
        through: list[str] = []
        rs = layer_readers(n.output[0], through, residual=is_qconv(n))
        if not rs:
            continue
        acts = [_canonical(quants[j][0] if k < 0 else _act(nodes[j])) for j, k in rs]
        if any(a != acts[0] for a in acts) or acts[0]["act_scale"] is None:
            continue
        if not acts[0]["act_bipolar"] and int(acts[0]["act_bits"]) > 8:  # type: ignore[call-overload]
            continue
        if any(k == 0 and _binary_weights(nodes[j], inits) for j, k in rs):
            continue
        fused[i] = (acts[0], [j for j, k in rs if k < 0])
        stale.update([n.output[0], *through, *(nodes[j].output[0] for j, k in rs if k < 0)])
    if not fused:
        return model

    out = copy_model(model)
    new_nodes = list(out.graph.node)
    drop: set[int] = set()
    for i, (act, qs) in fused.items():
        n = new_nodes[i]
        n.op_type = _LAYERS[n.op_type]
        for name, value in act.items():
            n.attribute.append(helper.make_attribute("out_" + name, value))
        for qi in qs:  # the residual Quant goes: its readers take the codes as R, with their quantizer
            drop.add(qi)
            for r in quants[qi][1]:
                new_nodes[r].input[4] = n.output[0]
                for name, value in act.items():
                    new_nodes[r].attribute.append(
                        helper.make_attribute(name.replace("act_", "residual_act_", 1), value)
                    )
    new_nodes = [m for k, m in enumerate(new_nodes) if k not in drop]
    rename_codes(new_nodes, stale, out.graph)
    set_nodes(out.graph, new_nodes, stale)
    return out


def rename_codes(nodes: list[onnx.NodeProto], values: set[str], graph: onnx.GraphProto) -> None:
    """Give the ``values`` that now hold int8 codes names of their own (``<name>__codes``, a free name) in ``nodes``:
    a declaration of the float32 value they held would contradict them."""
    used = {v for n in nodes for v in [*n.input, *n.output]} | {t.name for t in graph.initializer}
    renamed: dict[str, str] = {}
    for v in sorted(values):
        k = 0
        while f"{v}__codes{k or ''}" in used:
            k += 1
        renamed[v] = f"{v}__codes{k or ''}"
        used.add(renamed[v])
    for n in nodes:
        n.input[:] = [renamed.get(v, v) for v in n.input]
        n.output[:] = [renamed.get(v, v) for v in n.output]


__all__ = ["fuse_integer_codes", "rename_codes"]
