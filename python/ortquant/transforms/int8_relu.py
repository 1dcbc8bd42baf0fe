"""Rewrite: linger's default-domain int8/int32 ``Relu`` to ``thinker::Relu`` (decision 14)."""

from __future__ import annotations

import onnx

from ortquant.transforms._util import LINGER_DOMAINS, STANDARD_DOMAINS, copy_model, element_types

# Standard ops that keep their first input's element type (how int8 flows through a linger graph).
_TYPE_PRESERVING = {
    "Relu", "MaxPool", "Clip", "Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Concat",
    "Split", "Slice", "Gather", "Pad", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
}  # fmt: skip


def rewrite_int8_relu(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move default-domain ``Relu`` nodes on int8 / int32 tensors to ``thinker::Relu``.

    linger writes int8 ReLU as a standard ``Relu``, which onnxruntime refuses at load. The input type comes from
    the graph's declared or inferred types; where those are silent (linger ops without a registered schema), a
    value produced by a thinker/onnxinfer op other than ``Dequant``, or passed through type-preserving standard ops
    from one, is taken as an integer. Only the top-level graph is rewritten. Returns ``model`` itself when nothing
    changes, otherwise a rewritten copy (with a ``thinker`` opset import added if missing).
    """
    relus = [n for n in model.graph.node if n.op_type == "Relu" and n.domain in STANDARD_DOMAINS]
    if not relus:
        return model
    types = element_types(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    ints = {onnx.TensorProto.INT8, onnx.TensorProto.INT32}

    def is_int(value: str, depth: int = 0) -> bool:
        if value in types:
            return types[value] in ints
        node = producer.get(value)
        if node is None or depth > 64:
            return False
        if node.domain in LINGER_DOMAINS:
            return node.op_type != "Dequant"
        if node.domain in STANDARD_DOMAINS and node.op_type in _TYPE_PRESERVING and node.input:
            return is_int(node.input[0], depth + 1)
        return False

    if not any(n.input and is_int(n.input[0]) for n in relus):
        return model
    out = copy_model(model)
    for node in out.graph.node:
        if node.op_type == "Relu" and node.domain in STANDARD_DOMAINS and node.input and is_int(node.input[0]):
            node.domain = "thinker"
    if not any(imp.domain == "thinker" for imp in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid("thinker", 1))
    return out
