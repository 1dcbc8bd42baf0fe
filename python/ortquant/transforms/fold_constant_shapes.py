"""Rewrite: integer shape computations on constant initializers become initializers.

torch's TorchScript exporter computes some operands in the graph from constants: the ``pads`` input of a reflect /
replicate ``Pad`` (``padding_mode="reflect"``) is ``ConstantOfShape -> Concat -> Reshape -> Slice -> Transpose ->
Reshape -> Cast`` of int64 constants. onnxruntime folds such chains itself, but the graph transforms before it see
a ``Pad`` whose pads come from a node: the grid analysis (``grid.py``) cannot say the padded values lie on the input's
grid, and integer mode kept the layer after the Pad in float.

This transform computes, in numpy, the standard-domain nodes whose every input is a constant initializer (or a value
this transform computed) holding integers, whose output is integers too, and whose result is pure data movement or
exact: ``Identity``, ``ConstantOfShape`` (an integer ``value``), ``Concat``, ``Reshape``, ``Transpose``,
``Squeeze``, ``Unsqueeze``, ``Slice``, ``Gather`` and ``Cast`` between integer types of values the target type
holds. Each folded node becomes an initializer of its output (at most ``MAX_ELEMENTS`` elements: shapes and pads,
not tensors); chains fold in graph order. Not folded: a node onnxruntime would refuse as written
(``_read.standard_node_problem``), one whose operands it would refuse at run time (an index or axis out of range, a
reshape to another size: left for it to report), a graph output, inputs that are graph inputs (overridable) or
external data, subgraph nodes. Initializers only the folded nodes read are dropped. Returns ``model`` itself when
nothing folds.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._util import (
    STANDARD_DOMAINS,
    ModelError,
    fold_into_initializers,
    foldable_constants,
    opset_version,
)

MAX_ELEMENTS = 1024
_OPS = ("Identity", "ConstantOfShape", "Concat", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather",
        "Cast")  # fmt: skip
_INTS = (
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.INT16,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.INT32,
    onnx.TensorProto.UINT32,
    onnx.TensorProto.INT64,
    onnx.TensorProto.UINT64,
)


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _axes(node: onnx.NodeProto, args: list[np.ndarray | None], opset: int, since: int) -> list[int] | None:
    """The axes of Squeeze / Unsqueeze: an attribute before opset ``since``, the second input from it on."""
    if opset < since:
        return _read.attr_ints(node, "axes")
    if len(args) > 1 and args[1] is not None:
        return [int(v) for v in args[1].ravel()]
    return None


def _slice(x: np.ndarray, args: list[np.ndarray | None], node: onnx.NodeProto, opset: int) -> np.ndarray | None:
    if opset < 10:
        starts, ends = _read.attr_ints(node, "starts"), _read.attr_ints(node, "ends")
        axes, steps = _read.attr_ints(node, "axes"), None
    else:
        if len(args) < 3 or args[1] is None or args[2] is None:
            return None
        starts, ends = [int(v) for v in args[1].ravel()], [int(v) for v in args[2].ravel()]
        axes = [int(v) for v in args[3].ravel()] if len(args) > 3 and args[3] is not None else None
        steps = [int(v) for v in args[4].ravel()] if len(args) > 4 and args[4] is not None else None
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != len(starts) or len(steps) != len(starts) or any(s == 0 for s in steps):
        return None
    if any(not -x.ndim <= a < x.ndim for a in axes) or len({a % x.ndim for a in axes}) != len(axes):
        return None
    index: list[np.ndarray | slice] = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, starts, ends, steps, strict=True):
        dim = x.shape[a % x.ndim]
        b = b + dim if b < 0 else b
        e = e + dim if e < 0 else e
        if s > 0:
            b, e = min(max(b, 0), dim), min(max(e, 0), dim)
        else:
            b, e = min(max(b, 0), dim - 1), min(max(e, -1), dim - 1)
        index[a % x.ndim] = np.arange(b, e, s, dtype=np.int64)
    out = x
    for axis, idx in enumerate(index):
        if isinstance(idx, np.ndarray):
            out = np.take(out, idx, axis=axis)
    return out


def _fold(node: onnx.NodeProto, args: list[np.ndarray | None], opset: int) -> np.ndarray | None:
    """The node's output computed in numpy, or None when this form is not folded here."""
    op = node.op_type
    x = args[0] if args else None
    if x is None:
        return None
    if op == "Identity":
        return x.copy()
    if op == "ConstantOfShape":
        shape = [int(v) for v in x.ravel()]
        if x.ndim != 1 or any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
            return None
        t = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
        value = np.zeros(1, np.float32) if t is None else _read.tensor_array(t, node, "the value of")
        if value.size != 1 or not _is_int(value):
            return None
        return np.full(shape, value.ravel()[0], dtype=value.dtype)
    if op == "Concat":
        axis = _read.attr_int(node, "axis")
        if axis is None or any(a is None or a.ndim != x.ndim or a.dtype != x.dtype for a in args):
            return None
        if not -x.ndim <= axis < x.ndim:
            return None
        return np.concatenate(args, axis=axis)  # type: ignore[arg-type]
    if op == "Reshape":
        if len(args) < 2 or args[1] is None:
            return None
        allowzero = _read.attr_int(node, "allowzero", 0)
        dims = [int(d) for d in args[1].ravel()]
        if allowzero:
            if 0 in dims and -1 in dims:
                return None
        else:
            if any(d == 0 and i >= x.ndim for i, d in enumerate(dims)):
                return None
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
        if dims.count(-1) > 1 or any(d < -1 for d in dims):
            return None
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if -1 in dims:
            if known == 0 or x.size % known:
                return None
        elif known != x.size:
            return None
        return x.reshape(dims)
    if op == "Transpose":
        perm = _read.attr_ints(node, "perm")
        if perm is not None and sorted(perm) != list(range(x.ndim)):
            return None
        return np.transpose(x, perm)
    if op == "Squeeze":
        axes = _axes(node, args, opset, 13)
        if axes is None:
            return np.squeeze(x)
        if any(not -x.ndim <= a < x.ndim or x.shape[a % x.ndim] != 1 for a in axes):
            return None
        return np.squeeze(x, tuple(a % x.ndim for a in axes))
    if op == "Unsqueeze":
        axes = _axes(node, args, opset, 13)
        if axes is None:
            return None
        rank = x.ndim + len(axes)
        if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
            return None
        return np.expand_dims(x, tuple(sorted(a % rank for a in axes)))
    if op == "Slice":
        return _slice(x, args, node, opset)
    if op == "Gather":
        if len(args) < 2 or args[1] is None or not _is_int(args[1]) or x.ndim == 0:
            return None
        axis = _read.attr_int(node, "axis", 0)
        if axis is None or not -x.ndim <= axis < x.ndim:
            return None
        dim = x.shape[axis % x.ndim]
        idx = args[1].astype(np.int64)
        if np.any(idx < -dim) or np.any(idx >= dim):
            return None
        return np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis % x.ndim)
    if op == "Cast":
        to = _read.attr_int(node, "to")
        if to not in _INTS:
            return None
        dtype = helper.tensor_dtype_to_np_dtype(to)
        info = np.iinfo(dtype)
        if x.size and (int(x.min()) < info.min or int(x.max()) > info.max):
            return None
        return x.astype(dtype)
    return None


def fold_constant_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each foldable node (module doc) by an initializer holding its output."""
    graph = model.graph
    outputs = {o.name for o in graph.output}
    consts = foldable_constants(graph, _INTS)
    if not any(n.domain in STANDARD_DOMAINS and n.op_type in _OPS for n in graph.node):
        return model
    opset = opset_version(model, "") or opset_version(model, "ai.onnx")
    values: dict[str, np.ndarray] = {}
    folded: list[int] = []
    new: list[onnx.TensorProto] = []
    for idx, node in enumerate(graph.node):
        if node.domain not in STANDARD_DOMAINS or node.op_type not in _OPS or opset is None:
            continue
        if len(node.output) != 1 or not node.output[0] or node.output[0] in outputs or node.output[0] in consts:
            continue
        if not node.input or not all(not i or i in consts or i in values for i in node.input):
            continue
        if _read.standard_node_problem(node, model) is not None:
            continue
        args: list[np.ndarray | None] = []
        try:
            for name in node.input:
                if name and name not in values:
                    values[name] = _read.tensor_array(consts[name])
                args.append(values[name] if name else None)
            if not all(a is None or _is_int(a) for a in args):
                continue
            y = _fold(node, args, opset)
        except (ModelError, ValueError, TypeError, IndexError, OverflowError):
            continue
        if y is None or not _is_int(y) or y.size > MAX_ELEMENTS:
            continue
        values[node.output[0]] = y
        folded.append(idx)
        new.append(numpy_helper.from_array(np.ascontiguousarray(y), name=node.output[0]))
    if not folded:
        return model
    return fold_into_initializers(model, folded, new)
