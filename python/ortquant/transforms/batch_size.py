"""Make a model's batch dimension symbolic (or another fixed size) where the graph provably allows it.

Most QONNX exports fix the batch dimension at 1: the graph inputs and outputs say ``[1, ...]`` and the
``Reshape`` before the classifier has the constant shape ``[1, -1]``. onnxruntime then refuses any other number of
rows ("Got: 32 Expected: 1"). :func:`set_batch_size` rewrites such a model for ``batch`` rows (``None``: any
number), like qonnx's ``ChangeBatchSize``, but only where the rewrite is provably right:

- every graph input (that is not an initializer) must have the same leading dimension, the old batch;
- the leading dimension is followed through the graph with onnx shape inference (ortquant's op schemas
  included), starting from a symbolic batch on every input;
- a ``Reshape`` whose data input is batch-leading and whose constant shape starts with the old batch size (or with
  -1 while its other entries keep each row's size) gets a leading 0 instead ("copy the input's dimension"), which
  keeps every row a row for any batch size;
- no standard op may work along the batch axis (a Softmax or a reduction over axis 0, a Slice, Pad, Tile or
  Transpose of it, a Gemm that contracts it): per row with a batch of 1, such an op mixes rows of a larger batch;
- every graph output must then be batch-leading; otherwise :class:`ModelError` says which output loses the batch
  and at which node (a computed shape, a reshape that mixes rows, a non-batch input ...), and the model is better
  run one row at a time (what ``ortquant.ray.Predictor`` does then).

The declared shapes of the graph inputs and outputs, and of ``value_info`` entries that carry the batch, get the new
leading dimension (``"batch"`` for ``None``); besides the Reshapes above nothing else changes.
"""

from __future__ import annotations

import math

import onnx
from onnx import numpy_helper

from ortquant.transforms._util import ModelError, copy_model, infer_shapes

__all__ = ["set_batch_size"]

# The symbolic dimension followed through the graph (a name no exporter writes).
_SYMBOL = "ortquant_batch_dim"
# The name the rewritten model gives a dynamic batch dimension.
DYNAMIC_NAME = "batch"


def _dims(vi: onnx.ValueInfoProto) -> list[int | str | None] | None:
    """A value's shape as ints (known), strs (symbolic) and None (unknown); None without a shape."""
    t = vi.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out: list[int | str | None] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _set_dim(vi: onnx.ValueInfoProto, axis: int, value: int | str) -> None:
    d = vi.type.tensor_type.shape.dim[axis]
    if isinstance(value, int):
        d.dim_value = value
    else:
        d.dim_param = value


def _what(node: onnx.NodeProto) -> str:
    return f"node '{node.name or node.output[0]}' ({node.op_type})"


def _constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """Initializers and outputs of Constant nodes (with a ``value`` tensor)."""
    out = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    out[node.output[0]] = a.t
    return out


def _infer(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    errors: list[str] = []
    inferred = infer_shapes(model, data_prop=True, errors=errors)
    if inferred is None:  # a model onnx cannot infer at all
        raise ModelError(
            f"cannot follow the batch dimension through the graph: onnx shape inference failed: {errors[0]}"
        )
    shapes = {}
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        dims = _dims(vi)
        if dims is not None:
            shapes[vi.name] = dims
    return shapes


def _new_reshape_shape(
    shape: list[int], data: list[int | str | None], old_batch: int | None, allowzero: bool
) -> list[int] | None:
    """The shape constant (read with allowzero=0) that keeps the batch for a Reshape of batch-leading ``data``, or
    None if the constant's leading entry is not provably the batch."""
    if not shape or (allowzero and 0 in shape):
        return None  # with allowzero=1 a 0 means an empty dimension; without zeros allowzero changes nothing
    rest = shape[1:]
    if shape[0] == -1:
        # -1 first: the batch exactly when the other entries keep each row's size.
        if -1 in rest:
            return None
        sizes = [data[i + 1] if v == 0 and i + 1 < len(data) else v for i, v in enumerate(rest)]
        row = data[1:]
        if not all(isinstance(v, int) for v in sizes) or not all(isinstance(v, int) for v in row):
            return None
        if math.prod(sizes) != math.prod(row):  # type: ignore[arg-type]
            return None
        return [0, *rest]
    if old_batch is not None and shape[0] == old_batch:
        # The element count is the same for the old batch, so each output row is exactly one input row.
        return [0, *rest]
    return None


_REDUCE = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare",
}  # fmt: skip
# Standard ops whose `axis` attribute (default in the tuple) selects the axis they work along.
_AXIS_OPS = {
    "Softmax": -1, "LogSoftmax": -1, "Hardmax": -1, "ArgMax": 0, "ArgMin": 0, "Concat": None, "Split": 0,
    "Gather": 0, "GatherElements": 0, "LpNormalization": -1, "TopK": -1, "Compress": None, "Scatter": 0,
    "ScatterElements": 0,
}  # fmt: skip


def _ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    for a in node.attribute:
        if a.name == name:
            return list(a.ints) if a.type == onnx.AttributeProto.INTS else [int(a.i)]
    return None


def _input_ints(node: onnx.NodeProto, index: int, consts: dict[str, onnx.TensorProto]) -> list[int] | None:
    """A constant integer input as a list; None when absent or not constant."""
    if len(node.input) <= index or not node.input[index] or node.input[index] not in consts:
        return None
    return [int(v) for v in numpy_helper.to_array(consts[node.input[index]]).reshape(-1)]


def _mixes_rows(
    node: onnx.NodeProto, shapes: dict[str, list[int | str | None]], consts: dict[str, onnx.TensorProto]
) -> str | None:
    """Why ``node`` would combine rows of a batch-leading input (or None): a standard op along axis 0."""
    if node.domain not in ("", "ai.onnx") or not node.input or not node.input[0]:
        return None
    data = shapes.get(node.input[0])
    if not data or data[0] != _SYMBOL:
        if node.op_type in ("MatMul", "Gemm") and len(node.input) > 1:
            other = shapes.get(node.input[1])
            if other and len(other) == 2 and other[0] == _SYMBOL:
                return "contracts the batch (batch-leading second operand)"
        return None
    rank = len(data)

    def hits_axis0(axes: list[int] | None) -> bool:
        return axes is not None and any(a % rank == 0 for a in axes)

    op = node.op_type
    if op in _AXIS_OPS:
        axis = _ints(node, "axis")
        if axis is None and _AXIS_OPS[op] is not None:
            axis = [_AXIS_OPS[op]]
        if op == "Compress" and axis is None:
            return "flattens the batch (Compress without axis)"
        if hits_axis0(axis):
            return "works along the batch axis (axis 0)"
    elif op in _REDUCE:
        axes = _ints(node, "axes") or _input_ints(node, 1, consts)
        noop = (_ints(node, "noop_with_empty_axes") or [0])[0]
        if (not axes and not noop) or hits_axis0(axes):
            return "reduces over the batch axis"
    elif op == "CumSum" and hits_axis0(_input_ints(node, 1, consts)):
        return "accumulates along the batch axis"
    elif op == "Transpose":
        perm = _ints(node, "perm")
        if perm is None or perm[0] != 0:
            return "moves the batch axis"
    elif op == "Slice":
        starts = _input_ints(node, 1, consts) or _ints(node, "starts") or []
        axes = _input_ints(node, 3, consts) or _ints(node, "axes") or list(range(len(starts)))
        if hits_axis0(axes):
            return "slices the batch axis"
    elif op == "Pad":
        pads = _input_ints(node, 1, consts) or _ints(node, "pads")
        if pads is None or pads[0] != 0 or pads[len(pads) // 2] != 0:
            return "pads the batch axis (or pads computed at run time)"
    elif op == "Tile":
        repeats = _input_ints(node, 1, consts)
        if repeats is None or repeats[0] != 1:
            return "repeats the batch axis (or repeats computed at run time)"
    elif op == "Gemm" and (_ints(node, "transA") or [0])[0]:
        return "contracts the batch (transA=1)"
    elif op == "BatchNormalization" and (_ints(node, "training_mode") or [0])[0]:
        return "normalizes over the batch (training_mode=1)"
    return None


def _where_lost(model: onnx.ModelProto, shapes: dict[str, list[int | str | None]], output: str) -> str:
    """Where the batch gets lost on the way to ``output``: walking back from it through values that are not
    batch-leading, the first node that has a batch-leading input."""

    def leading(name: str) -> bool:
        s = shapes.get(name)
        return bool(s) and s[0] == _SYMBOL  # type: ignore[index]

    producer = {o: n for n in model.graph.node for o in n.output if o}
    todo, seen = [output], set()
    while todo:
        value = todo.pop()
        node = producer.get(value)
        if node is None or value in seen:
            continue
        seen.add(value)
        if any(leading(i) for i in node.input if i):
            got = shapes.get(value)
            shape = "unknown" if got is None else "[" + ", ".join("?" if d is None else str(d) for d in got) + "]"
            return f"{_what(node)} makes '{value}' of shape {shape} from a batch-leading input"
        todo.extend(i for i in node.input if i)
    return f"'{output}' does not depend on the batch-leading inputs"


def set_batch_size(model: onnx.ModelProto, batch: int | None) -> onnx.ModelProto:
    """Return ``model`` rewritten for ``batch`` rows per run (``None``: any number, a symbolic dimension).

    Returns ``model`` itself when nothing changes. Raises :class:`ModelError` when the leading dimension is not
    provably the batch everywhere (see the module docstring); the message names the input, output or node.
    """
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise ValueError(f"batch must be a positive int or None (any batch size), got {batch!r}")
    graph = model.graph
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    if not inputs:
        raise ModelError("the model has no inputs, so it has no batch dimension")
    old: list[int | str | None] = []
    for vi in inputs:
        dims = _dims(vi)
        if not dims:
            raise ModelError(
                f"input '{vi.name}' has no declared shape with a leading (batch) dimension; "
                "a batch size can only be set on inputs of rank >= 1"
            )
        old.append(dims[0])
    if len(set(old)) != 1 or old[0] is None:
        listing = ", ".join(f"'{vi.name}': {d}" for vi, d in zip(inputs, old, strict=True))
        raise ModelError(
            f"the inputs do not share one leading (batch) dimension ({listing}); "
            "only a model whose every input starts with the batch can be rebatched"
        )
    old_batch = old[0] if isinstance(old[0], int) else None
    if old_batch is None and batch is None:
        return model  # the inputs already declare a symbolic batch
    new: int | str = batch if batch is not None else DYNAMIC_NAME

    # The working copy: QONNX ops in their canonical domains (shape inference finds their schemas there; _infer
    # imports the domains the model uses without importing them), a symbolic batch on every input, no declared
    # shapes of outputs and intermediate values (declared fixed sizes would override what inference derives).
    from ortquant.transforms.legacy_domains import fix_legacy_domains

    work = copy_model(fix_legacy_domains(model))
    for vi in work.graph.input:
        if vi.name not in init_names:
            _set_dim(vi, 0, _SYMBOL)
    for vi in work.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    del work.graph.value_info[:]

    rewrites: dict[str, list[int]] = {}  # a Reshape's output -> its new shape constant (allowzero=0)
    consts = _constants(work.graph)
    for _ in range(len(work.graph.node) + 1):
        shapes = _infer(work)
        changed = False
        for node in work.graph.node:
            if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or node.output[0] in rewrites:
                continue
            if len(node.input) < 2 or node.input[1] not in consts:
                continue
            data = shapes.get(node.input[0])
            if not data or data[0] != _SYMBOL:
                continue
            out = shapes.get(node.output[0])
            if out and out[0] == _SYMBOL:
                continue
            allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
            shape = [int(v) for v in numpy_helper.to_array(consts[node.input[1]]).reshape(-1)]
            fixed = _new_reshape_shape(shape, data, old_batch, allowzero)
            if fixed is None:
                continue
            rewrites[node.output[0]] = fixed
            consts[_rewrite_reshape(work, node, fixed)] = work.graph.initializer[-1]
            changed = True
        if not changed:
            break

    # Rows must also stay independent: no standard op may work along the batch axis (a Softmax over axis 0, a
    # ReduceMean of the batch broadcast back, a Slice of the first rows ...), which shapes alone cannot show.
    consts = _constants(work.graph)
    for node in work.graph.node:
        reason = _mixes_rows(node, shapes, consts)
        if reason:
            raise ModelError(
                f"{_what(node)} {reason}: with a fixed batch of {old[0]} that is per row, with more rows it mixes "
                f"them; run it {old[0]} row(s) at a time instead"
            )

    for vi in model.graph.output:
        s = shapes.get(vi.name)
        if not s or s[0] != _SYMBOL:
            raise ModelError(
                f"output '{vi.name}' does not keep the batch as its leading dimension: "
                f"{_where_lost(work, shapes, vi.name)}; run it {old[0]} row(s) at a time instead"
            )
    # The result: the original model with the rewritten Reshape constants and the new leading dimension.
    result = copy_model(model)
    changed_any = False
    for node in result.graph.node:
        if node.op_type == "Reshape" and node.output[0] in rewrites:
            _rewrite_reshape(result, node, rewrites[node.output[0]])
            changed_any = True
    for vi in [*(v for v in result.graph.input if v.name not in init_names), *result.graph.output]:
        dims = _dims(vi)
        if dims and dims[0] != new:
            _set_dim(vi, 0, new)
            changed_any = True
    for vi in result.graph.value_info:
        dims, inferred = _dims(vi), shapes.get(vi.name)
        if not dims or not inferred or len(dims) != len(inferred):
            continue
        for axis, d in enumerate(inferred):
            if d == _SYMBOL and dims[axis] != new:
                _set_dim(vi, axis, new)
                changed_any = True
    return result if changed_any else model


def _rewrite_reshape(model: onnx.ModelProto, node: onnx.NodeProto, shape: list[int]) -> str:
    """Point ``node`` at a new int64 shape initializer (a fresh name: the old one may be shared) read with
    allowzero=0; returns the initializer's name."""
    import numpy as np

    name = _fresh_name(model, f"{node.input[1]}_batch")
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(shape, dtype=np.int64), name))
    node.input[1] = name
    kept = [a for a in node.attribute if a.name != "allowzero"]
    del node.attribute[:]
    node.attribute.extend(kept)
    return name


def _fresh_name(model: onnx.ModelProto, base: str) -> str:
    taken = {t.name for t in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    taken |= {vi.name for vi in model.graph.input}
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name
