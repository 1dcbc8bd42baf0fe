"""Rewrite: ``qonnx.custom_op.channels_last`` ops to Transpose + standard op + Transpose.

qonnx 1.0.0 registers ``Conv``, ``MaxPool`` and ``BatchNormalization`` in ``qonnx.custom_op.channels_last`` (its
``channels_last`` package; hls4ml/qonnx channels-last flows). Each runs the standard ONNX op of the same name on
its inputs moved to channels-first: input 0 (and, for Conv, input 1: the weights are stored channels-last too)
transposed with ``(0, r-1, 1, ..., r-2)`` where r is the rank of input 0, all other inputs as they are, and
output 0 transposed back with ``(0, 2, ..., r-1, 1)``. The rewrite does exactly that in the graph: a Transpose
before and after the standard node (a Conv weight that is an initializer is transposed once, here), so the float
computation is onnxruntime's standard op on the same values, as in qonnx. onnxruntime's transpose optimizer then
cancels the Transpose pairs between consecutive rewritten nodes (exact: a transpose moves values).

qonnx runs the standard op at the opset the model imports for the channels_last domain; the rewritten node uses
the model's default-domain opset (the three ops compute the same inference result in every opset that has them).
A node with more than one output (MaxPool's Indices), without input 0, or with a Conv weight initializer that
cannot be read or whose rank is not input 0's is an error naming the node; the attributes are passed to the
standard op as they are (onnxruntime judges them, naming the node). Returns ``model`` itself when there is no
channels_last node.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import ModelError, copy_model, infer_shapes

CHANNELS_LAST = "qonnx.custom_op.channels_last"
OPS = ("Conv", "MaxPool", "BatchNormalization")


def _rank(model: onnx.ModelProto, value: str) -> int | None:
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        if vi.name == value and vi.type.tensor_type.HasField("shape"):
            return len(vi.type.tensor_type.shape.dim)
    inferred = infer_shapes(model)  # the input is often a custom op's output (a QONNX Quant): it needs the schema
    if inferred is None:
        return None
    for vi in [*inferred.value_info, *inferred.output]:
        if vi.name == value and vi.type.tensor_type.HasField("shape"):
            return len(vi.type.tensor_type.shape.dim)
    return None


def to_first(rank: int) -> list[int]:
    """qonnx's ``to_channels_first_args``: (0, r-1, 1, ..., r-2)."""
    return [0, rank - 1, *range(1, rank - 1)]


def to_last(rank: int) -> list[int]:
    """qonnx's ``to_channels_last_args``: (0, 2, ..., r-1, 1)."""
    return [0, *range(2, rank), 1]


def _replace(out: onnx.ModelProto, node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """The Transpose + standard op + Transpose nodes for one channels_last node (a Conv weight initializer with no
    other consumer is transposed in place instead)."""
    name = _read.node_name(node)
    label = _read.node_label(node)
    if node.op_type not in OPS:
        raise ModelError(f"{label}: {CHANNELS_LAST} has no op {node.op_type} (qonnx 1.0.0 has {', '.join(OPS)})")
    if len(node.output) != 1 or not node.output[0]:
        raise ModelError(f"{label}: a {CHANNELS_LAST} node must have exactly one output")
    _read.input_name(node, 0, "the channels-last input")
    rank = _rank(out, node.input[0])
    if rank is None or rank < 3:
        raise ModelError(
            f"{label}: the rank of input '{node.input[0]}' is unknown or below 3 (the channels-last rewrite needs it)"
        )
    inits = {t.name: t for t in out.graph.initializer}
    uses = sum(i == (node.input[1] if len(node.input) > 1 else None) for n in out.graph.node for i in n.input)
    inputs = list(node.input)
    nodes = []
    x_cf = f"{name}__channels_first"
    nodes.append(helper.make_node("Transpose", [inputs[0]], [x_cf], name=f"{name}__to_first", perm=to_first(rank)))
    inputs[0] = x_cf
    if node.op_type == "Conv" and len(inputs) > 1:
        w = inputs[1]
        init = inits.get(w)
        if init is not None and uses == 1 and init.data_location != onnx.TensorProto.EXTERNAL:
            arr = _read.tensor_array(init, node, "the weight")
            if arr.ndim != rank:
                raise ModelError(
                    f"{label}: the weight '{w}' has rank {arr.ndim}, input 0 has rank {rank} (a channels-last Conv "
                    "transposes both alike)"
                )
            init.CopyFrom(numpy_helper.from_array(arr.transpose(to_first(rank)).copy(), w))
        else:
            w_cf = f"{name}__weight_channels_first"
            nodes.append(helper.make_node("Transpose", [w], [w_cf], name=f"{name}__w_to_first", perm=to_first(rank)))
            inputs[1] = w_cf
    y_cf = f"{name}__out_channels_first"
    std = helper.make_node(node.op_type, inputs, [y_cf], name=name)
    std.attribute.extend(_read.copy_attributes(node))
    nodes.append(std)
    nodes.append(helper.make_node("Transpose", [y_cf], [node.output[0]], name=f"{name}__to_last", perm=to_last(rank)))
    return nodes


def rewrite_channels_last(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each channels_last Conv/MaxPool/BatchNormalization by Transpose + standard op + Transpose."""
    if not any(n.domain == CHANNELS_LAST for n in model.graph.node):
        return model
    out = copy_model(model)
    # One node at a time, in graph order: once the nodes before it are standard ops, onnx shape inference knows the
    # rank of its input (qonnx's channels_last ops have no ONNX schema).
    while True:
        idx = next((i for i, n in enumerate(out.graph.node) if n.domain == CHANNELS_LAST), None)
        if idx is None:
            break
        node = out.graph.node[idx]
        replacement = _replace(out, node)
        nodes = list(out.graph.node)
        del out.graph.node[:]
        out.graph.node.extend([*nodes[:idx], *replacement, *nodes[idx + 1 :]])
    imports = [i for i in out.opset_import if i.domain != CHANNELS_LAST]
    del out.opset_import[:]
    out.opset_import.extend(imports)
    return out
