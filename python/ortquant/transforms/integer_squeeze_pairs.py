"""Integer-mode rule: a Squeeze followed by the Unsqueeze of the same axes, between two layers, goes::

    X [N, C, 1, W] -> Squeeze(axes = [2]) -> y -> Unsqueeze(axes = [2]) -> Z     =>  Z is X

Integer mode runs a 1-D convolution as a 2-D one of height 1 between an Unsqueeze and a Squeeze
(``integer_conv1d.py``), so a stack of 1-D layers (RadioML's VGG10) leaves a Squeeze -> Unsqueeze pair between every
two of them: two onnxruntime nodes that give back their input. With the pair gone, the layers read each other's
output directly (and ``fuse_integer_chain`` can run them as one node). The pair is taken when the Squeeze's output
is read by the Unsqueeze alone and is not a graph output, both name the same axes (as attributes before opset 13,
as a constant input from 13; negative axes counted from the rank), and onnx shape inference knows X's rank and a
size of 1 on every squeezed axis (so the Squeeze would not have failed: removing it changes no result). The
Unsqueeze's output is renamed to X in its readers, or, when it is a graph output, an Identity keeps its name.
Returns ``model`` itself when nothing matches.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import (
    STANDARD_DOMAINS,
    ModelError,
    copy_model,
    infer_shapes,
    node_readers,
    set_nodes,
    static_shape,
)


def _axes(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> list[int] | None:
    """The axes a Squeeze / Unsqueeze names (attribute or constant input), or None when not readable."""
    try:
        if len(node.input) >= 2 and node.input[1]:
            t = inits.get(node.input[1])
            if t is None or _read.has_attr(node, "axes"):
                return None
            return [int(v) for v in _read.tensor_array(t, node, "axes").reshape(-1).tolist()]
        if len(node.input) != 1:
            return None
        return _read.attr_ints(node, "axes", None)
    except ModelError:
        return None


def cancel_squeeze_pairs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Remove each Squeeze -> Unsqueeze pair of the same axes that gives back its input; see the module doc."""
    nodes = list(model.graph.node)
    readers = node_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}
    pairs: list[tuple[int, int, list[int], list[int]]] = []  # (Squeeze, Unsqueeze, their axes)
    for i, sq in enumerate(nodes):
        if sq.op_type != "Squeeze" or sq.domain not in STANDARD_DOMAINS or len(sq.output) != 1 or not sq.input[0]:
            continue
        y = sq.output[0]
        if y in outputs or len(readers.get(y, [])) != 1:
            continue
        j = readers[y][0]
        un = nodes[j]
        if un.op_type != "Unsqueeze" or un.domain not in STANDARD_DOMAINS or un.input[0] != y or len(un.output) != 1:
            continue
        a, b = _axes(sq, inits), _axes(un, inits)
        if a is None or b is None or len(a) == 0:
            continue
        pairs.append((i, j, a, b))
    if not pairs:
        return model

    inferred = infer_shapes(model)
    plan: list[tuple[int, int]] = []
    for i, j, a, b in pairs:
        x = static_shape(inferred, nodes[i].input[0])
        if x is None:
            continue
        r = len(x)
        na = sorted(v + r if v < 0 else v for v in a)
        nb = sorted(v + r if v < 0 else v for v in b)  # the Unsqueeze's output has X's rank again
        if na != nb or len(set(na)) != len(na) or any(not 0 <= v < r or x[v] != 1 for v in na):
            continue
        plan.append((i, j))
    if not plan:
        return model

    out = copy_model(model)
    g = out.graph
    drop: set[int] = set()
    stale: set[str] = set()
    rename: dict[str, str] = {}
    extra: list[onnx.NodeProto] = []
    for i, j in plan:
        x, y, z = g.node[i].input[0], g.node[i].output[0], g.node[j].output[0]
        drop.update((i, j))
        stale.update((y, z))
        if z in outputs:
            extra.append(helper.make_node("Identity", [x], [z], name=f"{z}__squeeze_pair"))
        else:
            rename[z] = x
    for n in g.node:
        for k, v in enumerate(n.input):
            while v in rename:
                v = rename[v]
            n.input[k] = v
    set_nodes(g, [n for k, n in enumerate(g.node) if k not in drop] + extra, stale)
    return out


__all__ = ["cancel_squeeze_pairs"]
