"""Integer-mode rule: a MaxPool right after a ``QConv`` is fused into it (the op's ``pool`` attribute).

    QConv -> y -> MaxPool(kernel_shape = strides = [pH, pW], no pads) -> z
      =>  QConv(pool = [pH, pW]) -> z

and, for the 1-D layers ``integer_conv1d`` writes as a 2-D ``QConv`` of height 1 followed by ``Squeeze(axis 2)``,

    QConv -> Squeeze(axis 2) -> MaxPool(kernel_shape = strides = [k]) -> z
      =>  QConv(pool = [1, k]) -> Squeeze(axis 2) -> z

The op pools each image's output while it is in cache (``core/integer/pool.h``), so the float output of the
convolution is never written to memory in full and read again by a separate node; onnxruntime's own MaxPool was
13-40 % of the small CNNs' time in integer mode (a 1-D pool has no vectorized kernel there). The values are the
same: the fused pool takes the max of the same float32 outputs over the same windows.

Only a MaxPool whose windows do not overlap and need no padding is fused: ``strides`` equal to ``kernel_shape``,
``pads`` absent or zero, ``auto_pad`` NOTSET or VALID, ``dilations`` 1, ``ceil_mode`` 0, one output (no Indices),
and the convolution's output (and the Squeeze's) read by the MaxPool alone and not a graph output. Anything else
stays as it is. Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, ModelError, copy_model, set_nodes

INTEGER_DOMAIN = "ortquant.integer"


def _window(node: onnx.NodeProto) -> list[int] | None:
    """The MaxPool's window when it is a non-overlapping, unpadded, floor-rounded pool with one output."""
    if node.op_type != "MaxPool" or node.domain not in STANDARD_DOMAINS or not node.input:
        return None
    if len(node.output) != 1 and any(o for o in node.output[1:]):
        return None
    try:
        kernel = _read.attr_ints(node, "kernel_shape", None)
        if kernel is None or len(kernel) not in (1, 2) or any(k < 1 for k in kernel):
            return None
        n = len(kernel)
        strides = _read.attr_ints(node, "strides", [1] * n, length=n)
        pads = _read.attr_ints(node, "pads", [0] * (2 * n), length=2 * n)
        dil = _read.attr_ints(node, "dilations", [1] * n, length=n)
        auto_pad = _read.attr_string(node, "auto_pad", "NOTSET")
        ceil_mode = _read.attr_int(node, "ceil_mode", 0)
    except ModelError:
        return None  # malformed: onnxruntime judges it
    if strides != kernel or any(pads or []) or any(d != 1 for d in dil or []) or ceil_mode:
        return None
    if auto_pad not in ("NOTSET", "VALID"):
        return None
    return kernel


def _squeezes_axis_2(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> bool:
    """Whether ``node`` is a default-domain Squeeze of axis 2 only (attribute or constant input)."""
    if node.op_type != "Squeeze" or node.domain not in STANDARD_DOMAINS:
        return False
    try:
        axes = _read.attr_ints(node, "axes", None)
    except ModelError:
        return False
    if axes is None and len(node.input) > 1 and node.input[1] in inits:
        axes = [int(v) for v in numpy_helper.to_array(inits[node.input[1]]).reshape(-1)]
    return axes == [2]


def fuse_integer_maxpool(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse each MaxPool that directly follows a ``QConv`` (or its 1-D Squeeze) into the op; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "QConv" and n.domain == INTEGER_DOMAIN for n in nodes):
        return model
    producer = {o: n for n in nodes for o in n.output if o}
    readers: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}

    def private(value: str) -> bool:  # read once, by the MaxPool or the Squeeze, and not a graph output
        return readers.get(value, 0) == 1 and value not in outputs

    fused: list[tuple[int, int, list[int], int | None]] = []  # (pool index, conv index, [pH, pW], squeeze index)
    index = {id(n): i for i, n in enumerate(nodes)}
    for i, node in enumerate(nodes):
        window = _window(node)
        if window is None or _read.standard_node_problem(node, model) is not None:
            continue  # (a node onnxruntime would refuse as written is left for it to refuse)
        src = producer.get(node.input[0])
        squeeze = None
        if len(window) == 1 and src is not None and _squeezes_axis_2(src, inits) and private(node.input[0]):
            squeeze = src
            src = producer.get(src.input[0])
            pool = [1, window[0]]
            conv_out = squeeze.input[0]
        else:
            pool = window
            conv_out = node.input[0]
        if len(pool) != 2 or src is None or src.op_type != "QConv" or src.domain != INTEGER_DOMAIN:
            continue
        if not private(conv_out) or any(a.name == "pool" for a in src.attribute):
            continue
        fused.append((i, index[id(src)], pool, index[id(squeeze)] if squeeze is not None else None))
    if not fused:
        return model

    out = copy_model(model)
    g = out.graph
    stale: set[str] = set()
    drop: set[int] = set()
    for pool_i, conv_i, pool, squeeze_i in fused:
        mp, conv = g.node[pool_i], g.node[conv_i]
        conv.attribute.append(helper.make_attribute("pool", pool))
        stale.add(conv.output[0])
        last = g.node[squeeze_i] if squeeze_i is not None else conv
        stale.add(last.output[0])
        last.output[0] = mp.output[0]  # the MaxPool's consumers (or the graph output) now read the pooled value
        drop.add(pool_i)
    # Shapes recorded for the unpooled values are wrong now (the pooled ones keep the MaxPool's entries).
    set_nodes(g, [n for i, n in enumerate(g.node) if i not in drop], stale)
    return out


__all__ = ["fuse_integer_maxpool"]
