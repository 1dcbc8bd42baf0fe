"""Rewrite: float arithmetic on constant initializers becomes an initializer, so the quantizers behind it are constant.

Brevitas exports compute some quantizer parameters in the graph from constants: a bias quantizer's bit width is
``Ceil(c)``, a scale ``Mul(a, b)``. onnxruntime folds such nodes itself, but the graph transforms before it see a
``Quant`` whose input comes from a node, not from an initializer, so they treat it as a run-time quantizer: the
weight-quantizer fold (``fold_weight_quantizers``) leaves it in the graph, and integer mode evaluates the constant
subgraph in a throwaway onnxruntime session of its own, once per weight.

This transform computes, in numpy, the standard-domain nodes whose every input is a constant initializer and whose
result numpy gives bit for bit as onnxruntime does: ``Identity``, ``Neg``, ``Abs``, ``Ceil``, ``Floor``, ``Round``
(half to even, ``numpy.rint``) and the IEEE operations ``Add``, ``Sub``, ``Mul``, ``Div`` (one correctly rounded
operation per element, with numpy's broadcasting, which is ONNX's multidirectional broadcasting), on float32 or
float64 tensors of one element type. Each folded node becomes an initializer of its output; chains fold in graph
order. Not folded: a node onnxruntime would refuse as written (``_read.standard_node_problem``: it must still
refuse it), a graph output, a result larger than its largest input (no broadcast blow-up of the file), inputs that
are graph inputs (overridable) or external data, and subgraph nodes. Initializers only the folded nodes read are
dropped. Returns ``model`` itself when nothing folds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, ModelError, fold_into_initializers, foldable_constants

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Identity": lambda x: x.copy(),
    "Neg": np.negative,
    "Abs": np.abs,
    "Ceil": np.ceil,
    "Floor": np.floor,
    "Round": np.rint,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
}
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)


def _fold(node: onnx.NodeProto, args: list[np.ndarray]) -> np.ndarray | None:
    """The node's output computed in numpy, or None when this form is not folded."""
    if any(a.dtype != args[0].dtype for a in args):
        return None
    with np.errstate(all="ignore"):  # inf / nan results are what onnxruntime gives too
        if node.op_type in _UNARY and len(args) == 1 and not node.attribute:
            y = _UNARY[node.op_type](args[0])
        elif node.op_type in _BINARY and len(args) == 2 and not node.attribute:
            try:
                shape = np.broadcast_shapes(args[0].shape, args[1].shape)
            except ValueError:
                return None  # onnxruntime refuses the shapes: leave the node to it
            if int(np.prod(shape)) > max(a.size for a in args):
                return None
            y = _BINARY[node.op_type](args[0], args[1])
        else:
            return None
    return np.asarray(y, dtype=args[0].dtype)


def fold_constant_arith(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each foldable node (module doc) by an initializer holding its output."""
    graph = model.graph
    outputs = {o.name for o in graph.output}
    consts = foldable_constants(graph, _FLOATS)
    values: dict[str, np.ndarray] = {}
    folded: list[int] = []
    new: list[onnx.TensorProto] = []
    for idx, node in enumerate(graph.node):
        if node.domain not in STANDARD_DOMAINS or (node.op_type not in _UNARY and node.op_type not in _BINARY):
            continue
        if len(node.output) != 1 or not node.output[0] or node.output[0] in outputs or node.output[0] in consts:
            continue
        if not node.input or not all(i in consts or i in values for i in node.input):
            continue
        if _read.standard_node_problem(node, model) is not None:
            continue
        args = []
        for name in node.input:
            if name not in values:
                try:
                    values[name] = _read.tensor_array(consts[name])
                except ModelError:
                    break
            args.append(values[name])
        if len(args) != len(node.input):
            continue
        y = _fold(node, args)
        if y is None:
            continue
        values[node.output[0]] = y
        folded.append(idx)
        new.append(numpy_helper.from_array(y, name=node.output[0]))
    if not folded:
        return model
    return fold_into_initializers(model, folded, new)
