"""Integer-mode rule: a ``LeakyRelu`` right after a ``QConv`` is fused into the op (its ``leaky_relu_alpha``)::

    QConv(relu = 0) -> y -> LeakyRelu(alpha) -> z   =>   QConv(leaky_relu_alpha = alpha) -> z

The op applies ``y >= 0 ? y : float32(alpha * y)`` to the rescaled float32 values (what onnxruntime's LeakyRelu
computes) while they are in cache, before anything else it fuses after the convolution (a pool, a pixel shuffle, a
residual, output codes), so the LeakyRelu's float32 tensor is not written and read back, and a layer whose output
a LeakyRelu fed into the next layer's quantizer can write that layer's codes (``integer_codes.py``).

Fused only when the QConv (domain ``ortquant.integer``) has no Relu of its own and its output is read by the
LeakyRelu alone and is no graph output, and the LeakyRelu is valid at the model's opset (onnxruntime would refuse
a malformed one; it is left for it to do so). Runs right after ``lower_integer``, before the other integer fusions.
Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, copy_model, set_nodes

INTEGER_DOMAIN = "ortquant.integer"
_ONNX_DEFAULT_ALPHA = 0.01  # LeakyRelu's default


def fuse_integer_leaky_relu(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse each LeakyRelu right after a ``QConv`` into the op; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "LeakyRelu" and n.domain in STANDARD_DOMAINS for n in nodes):
        return model
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for v in dict.fromkeys(n.input):
            if v:
                readers.setdefault(v, []).append(i)
    outputs = {o.name for o in model.graph.output}
    plan: list[tuple[int, int, float]] = []  # (conv, leaky relu, alpha)
    for ci, c in enumerate(nodes):
        if c.op_type != "QConv" or c.domain != INTEGER_DOMAIN or not c.output or len(c.input) > 4:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in c.attribute}
        if (
            attrs.get("relu", 0)
            or "leaky_relu_alpha" in attrs
            or "pool" in attrs
            or attrs.get("depth_to_space", 1) != 1
        ):
            continue
        y = c.output[0]
        rs = readers.get(y, [])
        if len(rs) != 1 or y in outputs:
            continue
        r = nodes[rs[0]]
        if r.op_type != "LeakyRelu" or r.domain not in STANDARD_DOMAINS or len(r.output) != 1 or r.input[0] != y:
            continue
        if _read.standard_node_problem(r, model) is not None:  # onnxruntime must still see (and refuse) it
            continue
        alpha = next((helper.get_attribute_value(a) for a in r.attribute if a.name == "alpha"), _ONNX_DEFAULT_ALPHA)
        plan.append((ci, rs[0], float(alpha)))
    if not plan:
        return model
    out = copy_model(model)
    g = out.graph
    drop: set[int] = set()
    stale: set[str] = set()
    for ci, ri, alpha in plan:
        conv = g.node[ci]
        stale.add(conv.output[0])
        conv.output[0] = g.node[ri].output[0]
        conv.attribute.append(helper.make_attribute("leaky_relu_alpha", alpha))
        drop.add(ri)
    set_nodes(g, [n for i, n in enumerate(g.node) if i not in drop], stale)
    return out


__all__ = ["fuse_integer_leaky_relu"]
