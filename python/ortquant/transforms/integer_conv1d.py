"""Integer-mode rule: a 1-D convolution (``Conv`` on ``[N, C, L]`` with a weight ``[M, C/group, k]``) runs as the
2-D ``QConv`` with a height of 1::

    x [N, C, L] -> Unsqueeze(axis 2) -> [N, C, 1, L] -> QConv (weight codes [M, C/group, 1, k]; strides [1, s],
    pads [0, p0, 0, p1], dilations [1, d], kernel_shape [1, k]) -> [N, M, 1, L'] -> Squeeze(axis 2) -> [N, M, L']

A folded BatchNormalization and Relu act per output channel and element, so they are fused before the Squeeze as
for 2-D layers. The float-exact backend does the same around onnxruntime's float Conv.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._integer_common import SkipError


def as_2d(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy of the 1-D Conv ``node`` with its geometry attributes in 2-D form (height 1), for the 2-D checks."""
    out = onnx.NodeProto()
    out.CopyFrom(node)
    del out.attribute[:]
    for a in node.attribute:
        if a.name in ("strides", "dilations", "kernel_shape"):
            v = _read.attr_ints(node, a.name, None, length=1)
            assert v is not None
            out.attribute.append(helper.make_attribute(a.name, [1, int(v[0])]))
        elif a.name == "pads":
            v = _read.attr_ints(node, a.name, None, length=2)
            assert v is not None
            out.attribute.append(helper.make_attribute(a.name, [0, int(v[0]), 0, int(v[1])]))
        else:
            out.attribute.append(a)
    return out


def check_input(rank: int | None) -> None:
    """SkipError unless the data input is known to be 3-D ([N, C, L]), which onnxruntime's 1-D Conv takes."""
    if rank != 3:
        raise SkipError(f"the 1-D convolution's input has rank {'unknown' if rank is None else rank}, not 3")


def _axes_nodes(op: str, x: str, y: str, name: str, opset: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    if opset >= 13:  # axes as an input
        axes = numpy_helper.from_array(np.asarray([2], dtype=np.int64), f"{name}_axes")
        return helper.make_node(op, [x, axes.name], [y], name=name), [axes]
    return helper.make_node(op, [x], [y], name=name, axes=[2]), []


def unsqueeze(x: str, y: str, name: str, opset: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """``y = Unsqueeze(x, axes=[2])`` for the model's default-domain ``opset`` (and its axes initializer)."""
    return _axes_nodes("Unsqueeze", x, y, name, opset)


def squeeze(x: str, y: str, name: str, opset: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """``y = Squeeze(x, axes=[2])`` for the model's default-domain ``opset`` (and its axes initializer)."""
    return _axes_nodes("Squeeze", x, y, name, opset)


def default_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset version."""
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
