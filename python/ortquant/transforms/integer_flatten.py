"""Integer-mode rule: a Flatten (or a Reshape that flattens the same way) whose only reader is a ``QGemm`` /
``QGemmCodes`` is fused into the op (its ``flatten`` attribute)::

    X -> Flatten(axis = a) -> x2 -> QGemm(x2, W, S, B)          =>  QGemm(X, W, S, B, flatten = a)
    X [d0, d1, ...] -> Reshape([s0, K]) -> x2 -> QGemm(x2, ...)  =>  QGemm(X, ..., flatten = 1)

The op reads X as ``Flatten(X, axis)`` would give it, row-major, so the bytes and the values are the same; the node
(and its onnxruntime call, a copy of the activations) goes. A Flatten with a negative axis is taken when X's rank is
known. A Reshape is taken only when it is exactly a Flatten at axis 1: its shape is a constant ``[s0, K]`` with K
the QGemm's K and the product of X's dimensions after the first (known, static), and s0 is -1, 0 (copy, without
``allowzero``) or X's first dimension. The Flatten / Reshape must be read by that QGemm's X alone and not be a
graph output; a QGemm that already flattens is left alone. Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import math

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import (
    STANDARD_DOMAINS,
    ModelError,
    copy_model,
    infer_shapes,
    node_readers,
    producers,
    set_nodes,
    static_shape,
)

INTEGER_DOMAIN = "ortquant.integer"
_GEMMS = ("QGemm", "QGemmCodes")


def _flatten_axis(
    node: onnx.NodeProto, model: onnx.ModelProto, inits: dict[str, onnx.TensorProto], k: int, shape
) -> int | None:
    """The axis ``node`` flattens its input at, as the QGemm of K = ``k`` would read it; None: not this rule's."""
    if node.domain not in STANDARD_DOMAINS or len(node.output) != 1:
        return None
    if _read.standard_node_problem(node, model) is not None:
        return None  # (a node onnxruntime would refuse as written is left for it to refuse)
    try:
        if node.op_type == "Flatten" and len(node.input) == 1:
            axis = _read.attr_int(node, "axis", 1)
            assert axis is not None
            if axis < 0:
                x = shape(node.input[0])
                if x is None or axis < -len(x):
                    return None
                axis += len(x)
            return axis
        if node.op_type == "Reshape" and len(node.input) == 2 and node.input[1] in inits:
            t = inits[node.input[1]]
            if len(t.dims) != 1 or t.data_type != onnx.TensorProto.INT64:  # onnxruntime takes a 1-D int64 shape only
                return None
            target = _read.tensor_array(t, node, "shape").tolist()
            x = shape(node.input[0])
            if len(target) != 2 or x is None or len(x) < 2 or any(d is None for d in x[1:]):
                return None
            s0, s1 = (int(v) for v in target)
            zero_ok = not _read.attr_int(node, "allowzero", 0)
            if s1 != k or math.prod(x[1:]) != k:
                return None
            if s0 == -1 or (s0 == 0 and zero_ok) or (x[0] is not None and s0 == x[0]):
                return 1
    except ModelError:
        return None
    return None


def fuse_integer_flatten(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse each Flatten / flattening Reshape read only by a ``QGemm`` / ``QGemmCodes`` into the op; see the module
    doc."""
    nodes = list(model.graph.node)
    producer = producers(nodes)
    readers = node_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}

    candidates: list[tuple[int, int]] = []  # (gemm, flatten)
    for gi, g in enumerate(nodes):
        if g.op_type not in _GEMMS or g.domain != INTEGER_DOMAIN or not g.input or _read.has_attr(g, "flatten"):
            continue
        fi = producer.get(g.input[0])
        if fi is None or nodes[fi].op_type not in ("Flatten", "Reshape") or g.input[0] in outputs:
            continue
        if readers.get(g.input[0]) != [gi] or len(g.input) < 2 or g.input[1] not in inits:
            continue
        candidates.append((gi, fi))
    if not candidates:
        return model

    inferred: list[onnx.GraphProto | None] = []  # shape inference once, only when a candidate needs it

    def shape(name: str) -> list[int | None] | None:
        if not inferred:
            inferred.append(infer_shapes(model))
        return static_shape(inferred[0], name)

    plan: list[tuple[int, int, int]] = []
    for gi, fi in candidates:
        w = inits[nodes[gi].input[1]]
        if len(w.dims) != 2:
            continue
        axis = _flatten_axis(nodes[fi], model, inits, int(w.dims[1]), shape)
        if axis is not None:
            plan.append((gi, fi, axis))
    if not plan:
        return model

    out = copy_model(model)
    g = out.graph
    drop: set[int] = set()
    stale: set[str] = set()
    for gi, fi, axis in plan:
        gemm, flat = g.node[gi], g.node[fi]
        stale.add(flat.output[0])
        gemm.input[0] = flat.input[0]
        gemm.attribute.append(helper.make_attribute("flatten", axis))
        drop.add(fi)
    set_nodes(g, [n for i, n in enumerate(g.node) if i not in drop], stale)
    return out


__all__ = ["fuse_integer_flatten"]
