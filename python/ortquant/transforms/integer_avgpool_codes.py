"""Integer-mode rule: an average pool of a quantized layer output runs on the quantizer's int8 codes.

    QConv -> y -> Quant(A) -> v -> AveragePool / GlobalAveragePool / spatial ReduceMean -> z
      =>  QConvCodes(out_act_* = A) -> c -> AvgPoolCodes(act_* = A) -> z

Brevitas exports its ``TruncAvgPool2d`` (and a plain ``AvgPool2d`` after a quantized activation) as a QONNX
quantizer followed by a float ``AveragePool``; onnxruntime's pool then reads four bytes per value and took a quarter
of a small CNN's time in integer mode. ``QConvCodes`` writes the quantizer's codes as the layer computes its outputs
(what ``Quant(A)`` would have output, ``integer_codes.py``) and ``AvgPoolCodes`` sums the codes of each window in
integers: ``z = float32(double(sum of (c + offset)) * scale / window size)``, the exact mean of the quantizer's
values rounded once to float64 and once to float32. onnxruntime adds the float32 values one by one and divides; the
two can differ in the last bit of ``z`` (not when the scale is a power of two, as in hls4ml / QKeras, where both are
exact). That is within integer mode's contract (docs/ops.md "Integer mode"): the values the next quantizer or layer
reads are those of the exact arithmetic.

Fused only when: the producer is a ``QConv`` of domain ``ortquant.integer`` (not channels-last) whose output only
the quantizer reads, as its input; the quantizer (``Quant`` / ``IntQuant`` / ``BipolarQuant``, QONNX domains) has at
most 8 bits and is one the fused quantizer takes (``lower_integer._activation``); every reader of its output is an
``AveragePool`` of two spatial axes without padding (``pads`` absent or zero, ``auto_pad`` NOTSET or VALID,
``ceil_mode`` 0, ``dilations`` 1; ``count_include_pad`` then does not matter), a ``GlobalAveragePool`` or a
``ReduceMean`` over the two spatial axes with ``keepdims`` 1 (a GlobalAveragePool as a ResNet head writes it); and
neither value is a graph output. Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._integer_common import SkipError
from ortquant.transforms._util import (
    QONNX_DOMAINS,
    STANDARD_DOMAINS,
    ModelError,
    copy_model,
    input_readers,
    opset_version,
    set_nodes,
)
from ortquant.transforms.integer_codes import _ACT_DEFAULTS, rename_codes
from ortquant.transforms.lower_integer import _activation, _Graph

INTEGER_DOMAIN = "ortquant.integer"
_QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant")


def _spatial_mean(node: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """Whether ``node`` is a ReduceMean of a 4-D tensor over its two spatial axes that keeps them (keepdims = 1): a
    GlobalAveragePool. Its axes are an attribute before opset 18 and a constant input from opset 18 on."""
    try:
        if _read.attr_int(node, "keepdims", 1) != 1:
            return False
        if (opset_version(model, "") or 1) < 18:
            axes = _read.attr_ints(node, "axes", None)
        else:
            inits = {t.name: t for t in model.graph.initializer}
            if len(node.input) < 2 or node.input[1] not in inits:
                return False
            axes = [int(a) for a in _read.tensor_array(inits[node.input[1]], node, "axes").reshape(-1)]
    except ModelError:
        return False
    return axes is not None and sorted(a % 4 for a in axes) == [2, 3] and len(set(axes)) == 2


def _pool_attrs(node: onnx.NodeProto, model: onnx.ModelProto) -> dict[str, object] | None:
    """AvgPoolCodes' window attributes for an unpadded 2-D AveragePool, a GlobalAveragePool or a ReduceMean over the
    spatial axes (keepdims); None otherwise."""
    if node.domain not in STANDARD_DOMAINS or len(node.output) != 1 or not node.input:
        return None
    if node.op_type == "GlobalAveragePool" or (node.op_type == "ReduceMean" and _spatial_mean(node, model)):
        return {"global": 1}
    if node.op_type != "AveragePool":
        return None
    try:
        kernel = _read.attr_ints(node, "kernel_shape", None)
        if kernel is None or len(kernel) != 2 or any(k < 1 for k in kernel):
            return None
        strides = _read.attr_ints(node, "strides", [1, 1], length=2)
        pads = _read.attr_ints(node, "pads", [0, 0, 0, 0], length=4)
        dil = _read.attr_ints(node, "dilations", [1, 1], length=2)
        auto_pad = _read.attr_string(node, "auto_pad", "NOTSET")
        ceil_mode = _read.attr_int(node, "ceil_mode", 0)
    except ModelError:
        return None  # malformed: onnxruntime judges it
    if strides is None or any(s < 1 for s in strides) or any(pads or []) or any(d != 1 for d in dil or []):
        return None
    if ceil_mode or auto_pad not in ("NOTSET", "VALID"):
        return None
    return {"kernel_shape": list(kernel), "strides": list(strides)}


def fuse_integer_avgpool_codes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Let each QConv -> quantizer -> average pool(s) chain pool the quantizer's codes; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "QConv" and n.domain == INTEGER_DOMAIN for n in nodes):
        return model
    readers = input_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    graph: _Graph | None = None
    plans: list[tuple[int, int, dict[str, object], list[tuple[int, dict[str, object]]]]] = []
    for i, n in enumerate(nodes):
        if n.op_type != "QConv" or n.domain != INTEGER_DOMAIN or not n.output or not n.output[0]:
            continue
        if any(a.name == "channels_last" and a.i for a in n.attribute):
            continue
        y = n.output[0]
        ry = readers.get(y, [])
        if y in outputs or len(ry) != 1 or ry[0][1] != 0:
            continue
        j = ry[0][0]
        q = nodes[j]
        if q.domain not in QONNX_DOMAINS or q.op_type not in _QUANTIZERS or not q.output or not q.output[0]:
            continue
        v = q.output[0]
        rv = readers.get(v, [])
        if v in outputs or not rv:
            continue
        pools = [(r, _pool_attrs(nodes[r], model)) for r, k in rv if k == 0]
        if len(pools) != len(rv) or any(p is None for _, p in pools):
            continue
        if any(_read.standard_node_problem(nodes[r], model) is not None for r, _ in pools):
            continue  # left for onnxruntime to refuse
        if graph is None:
            graph = _Graph(model)
        try:
            act, x, chain, _ = _activation(graph, v)
        except (SkipError, ValueError):
            continue
        if chain or x != y:
            continue
        act = {**_ACT_DEFAULTS, "act_bits": 1 if act.get("act_bipolar") else 8, **act}
        if not act["act_bipolar"] and int(act["act_bits"]) > 8:  # type: ignore[call-overload]
            continue
        plans.append((i, j, act, pools))  # type: ignore[arg-type]
    if not plans:
        return model

    out = copy_model(model)
    new_nodes = list(out.graph.node)
    drop: set[int] = set()
    stale: set[str] = set()
    for i, j, act, pools in plans:
        conv, quant = new_nodes[i], new_nodes[j]
        conv.op_type = "QConvCodes"
        for name, value in act.items():
            conv.attribute.append(helper.make_attribute("out_" + name, value))
        codes = quant.output[0]
        conv.output[0] = codes  # the quantizer's output now holds its codes (renamed below)
        stale.update([codes, nodes[i].output[0]])
        drop.add(j)
        for r, attrs in pools:
            old = new_nodes[r]
            new_nodes[r] = helper.make_node(
                "AvgPoolCodes", [codes], list(old.output), name=old.name or old.output[0], domain=INTEGER_DOMAIN,
                **{k: v for k, v in act.items() if k != "relu"}, **attrs,
            )  # fmt: skip
    new_nodes = [m for k, m in enumerate(new_nodes) if k not in drop]
    rename_codes(new_nodes, {nodes[j].output[0] for _, j, _, _ in plans}, out.graph)
    set_nodes(out.graph, new_nodes, stale)
    return out


__all__ = ["fuse_integer_avgpool_codes"]
