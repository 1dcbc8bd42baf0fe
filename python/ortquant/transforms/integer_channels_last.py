"""Integer-mode rule: a Transpose to channels-last right after a ``QConv`` is fused into it (``channels_last``)::

    QConv(...) -> y [N, M, OH, OW] -> Transpose(perm = [0, 2, 3, 1]) -> z [N, OH, OW, M]
      =>  QConv(..., channels_last = 1) -> z

Channels-last exports (hls4ml, QKeras) end with such a Transpose back to their own layout. The op rescales every
channel of a piece of pixels into a buffer and stores them pixel by pixel, so the NCHW float32 tensor is neither
written nor read back by a Transpose: exm_separable_conv (a 16-channel 512 x 512 output) 0.94-0.97x the time. The
values are the same (a Transpose moves them).

Fused only when: the layer is a ``QConv`` of domain ``ortquant.integer`` (float32 output) without a residual input
``R``, fused pool or depth_to_space; its output is read by that one standard Transpose alone (input 0) and is not a
graph output; the Transpose's ``perm`` is ``[0, 2, 3, 1]``. The layer's output takes the Transpose's output name
(the graph output, typically); the old value's ``value_info`` is dropped. Returns ``model`` itself when nothing is
fused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, copy_model, input_readers, set_nodes

INTEGER_DOMAIN = "ortquant.integer"


def _plain(conv: onnx.NodeProto) -> bool:
    """A QConv without R, fused pool, depth_to_space or channels_last."""
    if conv.op_type != "QConv" or conv.domain != INTEGER_DOMAIN or len(conv.output) != 1:
        return False
    if len(conv.input) > 4 and conv.input[4]:
        return False
    pool = _read.attr_ints(conv, "pool", None)
    if pool is not None and any(v != 1 for v in pool):
        return False
    return (_read.attr_int(conv, "depth_to_space", 1) or 1) == 1 and not _read.attr_int(conv, "channels_last", 0)


def fuse_integer_channels_last(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse a ``Transpose(perm = [0, 2, 3, 1])`` after a ``QConv`` into it; see the module doc."""
    nodes = list(model.graph.node)
    readers = input_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    fused: list[tuple[int, int]] = []  # (conv, transpose)
    for i, conv in enumerate(nodes):
        if not _plain(conv) or not conv.output[0] or conv.output[0] in outputs:
            continue
        rs = readers.get(conv.output[0], [])
        if len(rs) != 1 or rs[0][1] != 0:
            continue
        t = nodes[rs[0][0]]
        if t.op_type != "Transpose" or t.domain not in STANDARD_DOMAINS or len(t.output) != 1 or not t.output[0]:
            continue
        if list(_read.attr_ints(t, "perm", None) or []) != [0, 2, 3, 1]:
            continue
        if _read.standard_node_problem(t, model) is not None:  # left for onnxruntime to refuse
            continue
        fused.append((i, rs[0][0]))
    if not fused:
        return model
    out = copy_model(model)
    new_nodes = list(out.graph.node)
    stale: set[str] = set()
    drop: set[int] = set()
    for ci, ti in fused:
        conv, t = new_nodes[ci], new_nodes[ti]
        stale.add(conv.output[0])
        conv.output[0] = t.output[0]
        conv.attribute.append(helper.make_attribute("channels_last", 1))
        drop.add(ti)
    set_nodes(out.graph, [n for k, n in enumerate(new_nodes) if k not in drop], stale)
    return out


__all__ = ["fuse_integer_channels_last"]
