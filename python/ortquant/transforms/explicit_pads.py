"""Integer-mode rewrite: ``auto_pad`` of a Conv, MaxPool or AveragePool becomes the explicit ``pads`` it stands for.

Exporters that follow TensorFlow's padding (tf2onnx, and torch's TorchScript exporter for ``padding="same"`` with an
even kernel) write ``auto_pad = SAME_UPPER`` (or ``SAME_LOWER`` / ``VALID``) instead of ``pads``. onnxruntime
computes the pads itself when it runs the node, so the default mode needs nothing; the integer lowering and the
grid rules read ``pads`` and left such layers on the float path. With the input's spatial size known (the declared
shapes and onnx shape inference) the pads are onnxruntime's own (``ComputePadAndOutputShape``): per spatial axis
``need = (ceil(in / stride) - 1) * stride + kernel - in``, the head ``need // 2`` (``SAME_UPPER``) or
``(need + 1) // 2`` (``SAME_LOWER``), the tail the rest; ``VALID`` is no padding. With stride 1, ``need`` is
``kernel - 1`` whatever the size (so images of any size, a symbolic height and width, are rewritten too). Rewritten
only where that is what every onnxruntime version computes: unit dilations for ``SAME_*`` (older versions refuse
others), ``need >= 0``, a pool without ``ceil_mode``, the kernel and (strides above 1) the spatial input sizes known.
Other nodes keep ``auto_pad``.
Returns ``model`` itself when nothing is rewritten.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, ModelError, copy_model, value_shapes

_OPS = ("Conv", "MaxPool", "AveragePool")
_MODES = ("SAME_UPPER", "SAME_LOWER", "VALID")


def _pads(mode: str, sizes: list[int | None], kernel: list[int], strides: list[int]) -> list[int] | None:
    """The explicit pads [begins..., ends...] onnxruntime computes for ``mode``, or None (a size needed and
    unknown: with stride 1 the padding is ``kernel - 1`` whatever the size)."""
    if mode == "VALID":
        return [0] * (2 * len(sizes))
    heads, tails = [], []
    for n, k, s in zip(sizes, kernel, strides, strict=True):
        if s == 1:
            need = k - 1
        elif n is None:
            return None
        else:
            need = ((n + s - 1) // s - 1) * s + k - n
        if need < 0:
            return None
        head = (need + 1) // 2 if mode == "SAME_LOWER" else need // 2
        heads.append(head)
        tails.append(need - head)
    return heads + tails


def _mode(node: onnx.NodeProto) -> str | None:
    """The node's auto_pad when it is one this rewrite takes (a malformed attribute: None, onnxruntime judges it)."""
    if node.domain not in STANDARD_DOMAINS or node.op_type not in _OPS:
        return None
    try:
        mode = _read.attr_string(node, "auto_pad", "NOTSET")
    except ModelError:
        return None
    return mode if mode in _MODES else None


def explicit_pads(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrite each node of the module doc with explicit pads."""
    graph = model.graph
    candidates = [i for i, n in enumerate(graph.node) if _mode(n) is not None]
    if not candidates:
        return model
    shapes = value_shapes(model, initializers=True)
    new_nodes: dict[int, onnx.NodeProto] = {}
    for i in candidates:
        node = graph.node[i]
        if not node.input or _read.standard_node_problem(node, model) is not None:
            continue  # onnxruntime judges a node it refuses as written
        mode = str(_mode(node))
        x = shapes.get(node.input[0])
        if x is None or len(x) < 3 or any(d is not None and d < 1 for d in x[2:]):
            continue
        sizes = list(x[2:])
        rank = len(sizes)
        kernel = _read.attr_ints(node, "kernel_shape")
        if kernel is None and node.op_type == "Conv" and len(node.input) > 1:
            w = shapes.get(node.input[1])
            kernel = None if w is None or len(w) != rank + 2 or any(d is None for d in w[2:]) else list(w[2:])  # type: ignore[arg-type]
        strides = _read.attr_ints(node, "strides") or [1] * rank
        dilations = _read.attr_ints(node, "dilations") or [1] * rank
        if kernel is None or len(kernel) != rank or len(strides) != rank or len(dilations) != rank:
            continue
        if any(k < 1 for k in kernel) or any(s < 1 for s in strides):
            continue
        if mode != "VALID" and any(d != 1 for d in dilations):
            continue
        if node.op_type != "Conv" and _read.attr_int(node, "ceil_mode", 0):
            continue
        pads = _pads(mode, sizes, list(kernel), list(strides))
        if pads is None:
            continue
        n = helper.make_node(node.op_type, list(node.input), list(node.output), name=node.name, domain=node.domain)
        n.attribute.extend(_read.copy_attributes(node, drop=("auto_pad", "pads")))
        n.attribute.append(helper.make_attribute("pads", pads))
        new_nodes[i] = n
    if not new_nodes:
        return model
    out = copy_model(model)
    for i, n in new_nodes.items():
        out.graph.node[i].CopyFrom(n)
    return out
