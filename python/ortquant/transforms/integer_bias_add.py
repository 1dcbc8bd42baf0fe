"""Integer-mode rule: a constant bias ``Add`` (and a ``Relu``) right after a lowered layer go into the op::

    QGemm(B) -> y -> Add(y, c) [-> Relu] -> z   =>   QGemm(B + c [, relu = 1]) -> z
    QConv(B) -> y -> Add(y, c) [-> Relu] -> z   =>   QConv(B + c [, relu = 1]) -> z

QKeras exports (qonnx's converter) and some hand-built graphs write a dense or convolution layer as a bias-free
MatMul / Conv followed by an ``Add`` of the (quantized) bias. The lowered layer computes
``y = float32(float64(acc) * S[j] + B[j])``; with the bias folded it computes ``float32(float64(acc) * S[j] + (B[j] +
float64(c[j])))``, the contract's form for a layer with a bias (docs/ops.md "The numerics contract": one float64
multiply, one float64 add, one rounding to float32) instead of two float32 roundings, and the standard ``Relu``
after it is the op's own ``relu``. What goes is two nodes, two float32 tensors and their passes per layer; and the
layers behind can then read the op's codes (``integer_codes.py``).

Folded only when: the layer is a ``QGemm`` or ``QConv`` of domain ``ortquant.integer`` with float32 output, no
``relu``, LeakyRelu, pool, pixel shuffle, residual input or channels-last output of its own, read by the ``Add``
alone (not a graph output); the ``Add`` is valid at the model's opset and its other input is a float32 constant: an
initializer that is not a graph input, or the output of a QONNX quantizer on constant initializers (a bias
quantizer, evaluated by the library's own op, ``fold_weight_quantizers.evaluate_nodes``); the constant varies along
the output channel only (QGemm: shape ``[N]`` or ``[1, ..., 1, N]``; QConv: ``[M, 1, 1]`` or ``[1, M, 1, 1]``; either:
one value), so the sum keeps the layer's output shape. A ``Relu`` reading the sum alone (not a graph output) goes into
the op. A bias quantizer that only this ``Add`` read goes too. Returns ``model`` itself when nothing is folded.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, all_nodes, copy_model, input_readers, set_nodes
from ortquant.transforms.fold_weight_quantizers import evaluate_nodes, foldable_nodes
from ortquant.transforms.lower_integer import _Graph

INTEGER_DOMAIN = "ortquant.integer"
# Attributes of a layer that act on its output after the rescale: the bias would have to come before them.
_AFTER = ("leaky_relu_alpha", "pool", "channels_last")


def _channel_bias(c: np.ndarray, layer: str, channels: int, out_rank: int | None) -> np.ndarray | None:
    """The bias as one float64 value per output channel, or None when ``c`` does not vary along that axis alone."""
    if c.dtype != np.float32 or not np.all(np.isfinite(c)):
        return None
    if c.size == 1 and (c.ndim <= 1 or (out_rank is not None and c.ndim <= out_rank)):
        return np.full(channels, float(c.ravel()[0]), dtype=np.float64)
    if c.size != channels:
        return None
    shape = list(c.shape)
    if layer == "QGemm":  # [..., N]: the channel is the last axis
        ok = shape[-1] == channels and all(d == 1 for d in shape[:-1])
        ok = ok and (c.ndim == 1 or (out_rank is not None and c.ndim <= out_rank))
    else:  # [N, M, H, W]: the channel is axis 1, i.e. the bias is [M, 1, 1] or [1, M, 1, 1]
        ok = (c.ndim == 3 and shape == [channels, 1, 1]) or (c.ndim == 4 and shape == [1, channels, 1, 1])
    return c.astype(np.float64).reshape(channels) if ok else None


def fuse_integer_bias_add(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fold each constant bias Add (and a Relu after it) behind a lowered layer into the op; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "Add" and n.domain in STANDARD_DOMAINS for n in nodes):
        return model
    readers = {v: sorted({i for i, _ in rs}) for v, rs in input_readers(nodes).items()}  # value -> reading nodes
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    outputs = {o.name for o in model.graph.output}
    inputs = {i.name for i in model.graph.input}
    inits = {t.name: t for t in model.graph.initializer if t.name not in inputs}
    quants = {n.output[0]: n for n in foldable_nodes(model)}
    shapes: _Graph | None = None  # element types and shapes as onnxruntime sees them, inferred on first use

    def rank_of(value: str) -> int | None:
        """The rank of a value from the graph inputs' declarations (lower_integer's shape inference, run once and
        only for a bias of more than one dimension, whose broadcast depends on it; value_info can be stale)."""
        nonlocal shapes
        if shapes is None:
            shapes = _Graph(model)
        return shapes.rank(value)

    def only_reader(value: str) -> int | None:
        rs = readers.get(value, [])
        return rs[0] if len(rs) == 1 and value not in outputs else None

    def constant(name: str) -> tuple[np.ndarray, int | None] | None:
        """(value, index of the quantizer node computing it or None) of a constant input, else None."""
        if name in inits:
            try:
                return _read.tensor_array(inits[name], onnx.NodeProto(), "the bias"), None
            except Exception:  # a malformed initializer: onnxruntime reports it
                return None
        q = quants.get(name)
        if q is None:
            return None
        try:
            (t,) = evaluate_nodes(model, [q])
        except Exception:  # the quantizer's own error surfaces where the model is run
            return None
        return numpy_helper.to_array(t), producer[name]

    plan: list[tuple[int, int, int | None, int | None, np.ndarray]] = []  # layer, add, relu, quant, bias
    for li, layer in enumerate(nodes):
        if layer.domain != INTEGER_DOMAIN or layer.op_type not in ("QGemm", "QConv") or len(layer.output) != 1:
            continue
        if layer.op_type == "QConv" and len(layer.input) > 4:  # a residual input R
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in layer.attribute}
        if attrs.get("relu", 0) or any(a in attrs for a in _AFTER) or attrs.get("depth_to_space", 1) != 1:
            continue
        if len(layer.input) < 4 or layer.input[3] not in inits or layer.input[1] not in inits:
            continue
        y = layer.output[0]
        ai = only_reader(y)
        if ai is None:
            continue
        add = nodes[ai]
        if add.op_type != "Add" or add.domain not in STANDARD_DOMAINS or len(add.input) != 2 or len(add.output) != 1:
            continue
        if _read.standard_node_problem(add, model) is not None:
            continue
        other = add.input[1] if add.input[0] == y else add.input[0]
        if other == y or not other:
            continue
        found = constant(other)
        if found is None:
            continue
        c, qi = found
        channels = int(inits[layer.input[1]].dims[0])
        out_rank: int | None = 4
        if layer.op_type == "QGemm":
            out_rank = (rank_of(y) or rank_of(layer.input[0])) if c.ndim > 1 else None
        bias = _channel_bias(c, layer.op_type, channels, out_rank)
        if bias is None:
            continue
        ri = only_reader(add.output[0])
        relu = None
        if ri is not None:
            r = nodes[ri]
            if (
                r.op_type == "Relu"
                and r.domain in STANDARD_DOMAINS
                and list(r.input) == [add.output[0]]
                and len(r.output) == 1
                and r.output[0]
                and _read.standard_node_problem(r, model) is None
            ):
                relu = ri
        quant = qi if qi is not None and readers.get(other, []) == [ai] else None
        plan.append((li, ai, relu, quant, bias))
    if not plan:
        return model

    out = copy_model(model)
    g = out.graph
    used = {t.name for t in g.initializer} | {v for n in g.node for v in [*n.input, *n.output]}
    drop: set[int] = set()
    stale: set[str] = set()
    for li, ai, ri, qi, bias in plan:
        layer = g.node[li]
        b = numpy_helper.to_array(inits[layer.input[3]]).astype(np.float64).reshape(-1)
        name, k = f"{layer.input[3]}_bias", 0
        while name in used:
            k += 1
            name = f"{layer.input[3]}_bias{k}"
        used.add(name)
        g.initializer.append(numpy_helper.from_array(b + bias, name))
        layer.input[3] = name
        stale.add(layer.output[0])
        last = ri if ri is not None else ai
        stale.add(g.node[ai].output[0])
        layer.output[0] = g.node[last].output[0]
        if ri is not None:
            kept_attrs = [a for a in layer.attribute if a.name != "relu"]
            del layer.attribute[:]
            layer.attribute.extend([*kept_attrs, helper.make_attribute("relu", 1)])
        drop.update(i for i in (ai, ri, qi) if i is not None)
    for li, *_ in plan:  # the layer's new output keeps its declaration: the same values, float32, same shape
        stale.discard(g.node[li].output[0])
    set_nodes(g, [n for i, n in enumerate(g.node) if i not in drop], stale)
    referenced = {v for n in all_nodes(g) for v in n.input} | {o.name for o in g.output}
    kept = [t for t in g.initializer if t.name in referenced or t.name in inputs]
    del g.initializer[:]
    g.initializer.extend(kept)
    return out


__all__ = ["fuse_integer_bias_add"]
