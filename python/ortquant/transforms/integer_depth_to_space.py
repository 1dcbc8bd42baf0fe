"""Integer-mode rule: a DepthToSpace right after a ``QConv`` (a sub-pixel convolution's pixel shuffle, as in ESPCN) is
fused into the op (its ``depth_to_space`` and ``depth_to_space_mode`` attributes), with a Relu after the shuffle::

    QConv -> y -> DepthToSpace(blocksize = b, mode) -> z [-> Relu -> r]
      =>  QConv(depth_to_space = b, depth_to_space_mode = mode [, relu = 1]) -> z (or r)

The op shuffles each image's output while it is in cache (``core/integer/depth_to_space.h``); a Relu commutes with
the shuffle (it acts per element), so it is applied by the op's rescale before it. The values are the same.

Only a DepthToSpace with a blocksize of at least 2 and a mode of DCR or CRD, on a QConv output that it alone reads
(not a graph output), from a QConv without a fused pool or residual input, is fused; a Relu is taken along when the
QConv has none of its own and the Relu is the DepthToSpace's only reader (and its output no graph output). Returns
``model`` itself when nothing is fused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, ModelError, copy_model, node_readers, producers, set_nodes

INTEGER_DOMAIN = "ortquant.integer"


def _shuffle(node: onnx.NodeProto) -> tuple[int, str] | None:
    """(blocksize, mode) of a DepthToSpace this rule fuses; None otherwise (malformed ones: onnxruntime judges)."""
    if node.op_type != "DepthToSpace" or node.domain not in STANDARD_DOMAINS or len(node.input) != 1:
        return None
    try:
        bs = _read.attr_int(node, "blocksize", None)
        mode = _read.attr_string(node, "mode", "DCR")
    except ModelError:
        return None
    if bs is None or bs < 2 or bs > 256 or mode not in ("DCR", "CRD"):
        return None
    return bs, mode


def fuse_integer_depth_to_space(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse each DepthToSpace (and a Relu after it) that directly follows a ``QConv`` into the op; see the module
    doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "DepthToSpace" for n in nodes):
        return model
    producer = producers(nodes)
    readers = node_readers(nodes)
    outputs = {o.name for o in model.graph.output}

    plan: list[tuple[int, int, tuple[int, str], int | None]] = []  # (conv, shuffle, (bs, mode), relu)
    for si, node in enumerate(nodes):
        shuffle = _shuffle(node)
        if shuffle is None or _read.standard_node_problem(node, model) is not None:
            continue  # (a node onnxruntime would refuse as written is left for it to refuse)
        ci = producer.get(node.input[0])
        if ci is None or readers.get(node.input[0]) != [si] or node.input[0] in outputs:
            continue
        conv = nodes[ci]
        attrs = {a.name: a for a in conv.attribute}
        if conv.op_type != "QConv" or conv.domain != INTEGER_DOMAIN or len(conv.input) > 4:
            continue
        if "pool" in attrs or "depth_to_space" in attrs:
            continue
        relu = None
        rs = readers.get(node.output[0], [])
        if len(rs) == 1 and node.output[0] not in outputs and not ("relu" in attrs and attrs["relu"].i):
            r = nodes[rs[0]]
            if r.op_type == "Relu" and r.domain in STANDARD_DOMAINS and len(r.output) == 1:
                relu = rs[0] if _read.standard_node_problem(r, model) is None else None
        plan.append((ci, si, shuffle, relu))
    if not plan:
        return model

    out = copy_model(model)
    g = out.graph
    drop: set[int] = set()
    stale: set[str] = set()
    for ci, si, (bs, mode), relu in plan:
        conv = g.node[ci]
        stale.add(conv.output[0])
        last = g.node[relu] if relu is not None else g.node[si]
        if relu is not None:
            stale.add(g.node[si].output[0])
            kept = [a for a in conv.attribute if a.name != "relu"]
            del conv.attribute[:]
            conv.attribute.extend([*kept, helper.make_attribute("relu", 1)])
            drop.add(relu)
        conv.output[0] = last.output[0]
        conv.attribute.extend(
            [helper.make_attribute("depth_to_space", bs), helper.make_attribute("depth_to_space_mode", mode)]
        )
        drop.add(si)
    set_nodes(g, [n for i, n in enumerate(g.node) if i not in drop], stale)
    return out


__all__ = ["fuse_integer_depth_to_space"]
