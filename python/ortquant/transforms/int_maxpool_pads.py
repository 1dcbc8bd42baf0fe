"""Rewrite: integer MaxPool whose pads reach the kernel size (linger's ceil-mode MaxPool) to Pad + MaxPool.

linger writes ``MaxPool2d(ceil_mode=True)`` as a standard MaxPool with end pads that can reach or exceed the
kernel (e.g. kernel [2, 3], pads [0, 1, 1, 3]); onnxruntime refuses such a node ("Pad should be smaller than
kernel"); thinker runs it with windows in which padded positions never win. Padding the int8 input with the
type's minimum (-128; 0 for uint8) and pooling without pads gives exactly that: a window that holds at least one
input element has that element's max (every element is >= the pad value), and the output size is the same
``floor((H + begin + end - K) / S) + 1``. A window made only of padding (impossible for pads that come from
torch's ceil_mode, whose last window starts inside the input or the begin padding) gives the type's minimum.

Only MaxPool nodes on int8/uint8 values (declared, inferred, or produced by a linger op as in
``rewrite_int8_relu``) with some pad >= the kernel along its axis, one output, no dilation other than 1 and no
``auto_pad``, no ``ceil_mode`` and a default-domain opset >= 11 (Pad with tensor inputs) are rewritten. A MaxPool
whose attributes are malformed (``kernel_shape`` / ``pads`` not a list of ints, kernel sizes below 1, negative pads)
is left as it is, for onnxruntime to refuse, naming it. Returns ``model`` itself when there is none.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import LINGER_DOMAINS, STANDARD_DOMAINS, ModelError, copy_model, element_types

_PAD_VALUE = {TensorProto.INT8: np.int8(-128), TensorProto.UINT8: np.uint8(0)}
_TYPE_PRESERVING = {"Relu", "MaxPool", "Clip", "Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten",
                    "Concat", "Split", "Slice", "Gather", "Pad", "Expand", "Tile"}  # fmt: skip


def _pool_geometry(node: onnx.NodeProto) -> tuple[list[int], list[int]] | None:
    """(kernel_shape, pads) of a MaxPool this transform rewrites; None for any other node, and for a MaxPool whose
    attributes it does not understand (onnxruntime judges those)."""
    if node.op_type != "MaxPool" or node.domain not in STANDARD_DOMAINS or len(node.output) != 1 or not node.input:
        return None
    try:
        kernel = _read.attr_ints(node, "kernel_shape", None)
        if kernel is None:
            return None
        n = len(kernel)
        pads = _read.attr_ints(node, "pads", None, length=2 * n)
        dil = _read.attr_ints(node, "dilations", [1] * n)
        auto_pad = _read.attr_string(node, "auto_pad", "NOTSET")
        ceil_mode = _read.attr_int(node, "ceil_mode", 0)
    except ModelError:
        return None
    if pads is None or ceil_mode or auto_pad != "NOTSET" or any(d != 1 for d in dil or []):
        return None
    if any(k < 1 for k in kernel) or any(p < 0 for p in pads):
        return None
    if not any(pads[i] >= kernel[i] or pads[i + n] >= kernel[i] for i in range(n)):
        return None
    return kernel, pads


def _int_type(model: onnx.ModelProto, value: str) -> int | None:
    types = element_types(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    for _ in range(64):
        if value in types:
            t = types[value]
            return t if t in _PAD_VALUE else None
        node = producer.get(value)
        if node is None:
            return None
        if node.domain in LINGER_DOMAINS:
            return TensorProto.INT8 if node.op_type not in ("Dequant",) else None
        if node.domain in STANDARD_DOMAINS and node.op_type in _TYPE_PRESERVING and node.input:
            value = node.input[0]
            continue
        return None
    return None


def rewrite_int_maxpool_pads(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each integer MaxPool with pads >= kernel by Pad(type minimum) + MaxPool without pads."""
    candidates = [n for n in model.graph.node if _pool_geometry(n) is not None]
    opset = next((int(i.version) for i in model.opset_import if i.domain in STANDARD_DOMAINS), 0)
    if not candidates or opset < 11:
        return model
    kinds = {n.output[0]: _int_type(model, n.input[0]) for n in candidates}
    if not any(kinds.values()):
        return model
    out = copy_model(model)
    nodes: list[onnx.NodeProto] = []
    for node in out.graph.node:
        geometry = _pool_geometry(node)
        elem = kinds.get(node.output[0]) if geometry is not None else None
        if geometry is None or not elem:
            nodes.append(node)
            continue
        kernel, pads = geometry
        n = len(kernel)
        base = _read.node_name(node)
        pads_name, value_name, padded = f"{base}__pads", f"{base}__pad_value", f"{base}__padded"
        out.graph.initializer.append(
            numpy_helper.from_array(np.array([0, 0, *pads[:n], 0, 0, *pads[n:]], np.int64), pads_name)
        )
        out.graph.initializer.append(numpy_helper.from_array(np.array(_PAD_VALUE[elem]), value_name))
        nodes.append(helper.make_node("Pad", [node.input[0], pads_name, value_name], [padded], name=f"{base}__pad"))
        pool = helper.make_node("MaxPool", [padded], list(node.output), name=node.name)
        pool.attribute.extend(_read.copy_attributes(node, drop=("pads", "auto_pad")))
        nodes.append(pool)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
