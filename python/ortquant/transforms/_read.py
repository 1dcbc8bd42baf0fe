"""Validating readers: how the transforms read a node's attributes and inputs and an initializer's values.

Every reader checks what it reads (attribute type, count, finiteness, UTF-8 encoding; input presence; tensor
element type, dimensions, raw-data size, storage) and raises :class:`ModelError` naming the node (its name, or its
first output when it has none), the attribute or input, and what was expected. A transform that must not refuse a
model (because onnxruntime's float path should judge it) catches ``ModelError`` and leaves the node as it is.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from ortquant.transforms._util import ModelError

_TYPE_NAMES = {v: k for k, v in AttributeProto.AttributeType.items()}


def node_name(node: onnx.NodeProto) -> str:
    """The name users know a node by: its name, or its first output when it has none."""
    if node.name:
        return node.name
    return next((o for o in node.output if o), "")


def node_label(node: onnx.NodeProto) -> str:
    """``<op> node '<name>'``, the way errors name a node."""
    return f"{node.op_type} node '{node_name(node)}'"


def _find(node: onnx.NodeProto, name: str) -> AttributeProto | None:
    for a in node.attribute:
        if a.name == name:
            return a
    return None


def _expect_type(node: onnx.NodeProto, a: AttributeProto, want: int) -> None:
    if a.type != want:
        got = _TYPE_NAMES.get(a.type, str(a.type))
        raise ModelError(f"{node_label(node)}: attribute '{a.name}' must be {_TYPE_NAMES[want]}, got {got}")


def has_attr(node: onnx.NodeProto, name: str) -> bool:
    return _find(node, name) is not None


def attr_int(node: onnx.NodeProto, name: str, default: int | None = None) -> int | None:
    """An INT attribute (``default`` when absent)."""
    a = _find(node, name)
    if a is None:
        return default
    _expect_type(node, a, AttributeProto.INT)
    return int(a.i)


def attr_bool(node: onnx.NodeProto, name: str, default: bool) -> bool:
    """An INT attribute that must be 0 or 1 (as ortquant's kernels read ``signed`` / ``narrow``)."""
    v = attr_int(node, name, int(default))
    if v not in (0, 1):
        raise ModelError(f"{node_label(node)}: attribute '{name}' must be 0 or 1, got {v}")
    return bool(v)


def attr_float(node: onnx.NodeProto, name: str, default: float, *, finite: bool = True) -> float:
    """A FLOAT attribute (``default`` when absent), finite unless ``finite=False``."""
    a = _find(node, name)
    if a is None:
        return default
    _expect_type(node, a, AttributeProto.FLOAT)
    v = float(a.f)
    if finite and not math.isfinite(v):
        raise ModelError(f"{node_label(node)}: attribute '{name}' must be finite, got {v!r}")
    return v


def attr_ints(
    node: onnx.NodeProto, name: str, default: list[int] | None = None, *, length: int | None = None
) -> list[int] | None:
    """An INTS attribute with at least one value (exactly ``length`` when given); ``default`` when absent."""
    a = _find(node, name)
    if a is None:
        return default
    _expect_type(node, a, AttributeProto.INTS)
    v = [int(x) for x in a.ints]
    if not v:
        raise ModelError(f"{node_label(node)}: attribute '{name}' is an empty list of ints")
    if length is not None and len(v) != length:
        raise ModelError(f"{node_label(node)}: attribute '{name}' must have {length} values, got {len(v)}")
    return v


def attr_string(node: onnx.NodeProto, name: str, default: str | None = None) -> str | None:
    """A STRING attribute decoded as UTF-8 (``default`` when absent)."""
    a = _find(node, name)
    if a is None:
        return default
    _expect_type(node, a, AttributeProto.STRING)
    try:
        return a.s.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{node_label(node)}: attribute '{name}' is not valid UTF-8 ({e.reason})") from None


def copy_attributes(node: onnx.NodeProto, *, drop: tuple[str, ...] = ()) -> list[AttributeProto]:
    """The node's attributes as they are (type and values kept, even an empty list), without ``drop``."""
    out = []
    for a in node.attribute:
        if a.name in drop:
            continue
        c = AttributeProto()
        c.CopyFrom(a)
        out.append(c)
    return out


def input_name(node: onnx.NodeProto, i: int, what: str) -> str:
    """The name of input ``i`` (``what`` says what it is); an error when the node has no such input."""
    if len(node.input) <= i or not node.input[i]:
        raise ModelError(f"{node_label(node)}: input {i} ({what}) is missing; the node has {len(node.input)} inputs")
    return node.input[i]


def require_inputs(node: onnx.NodeProto, n: int, what: str) -> None:
    """An error unless the node has at least ``n`` non-empty inputs (``what`` names them for the message)."""
    if len(node.input) < n or not all(node.input[:n]):
        raise ModelError(f"{node_label(node)}: {what} ({n} inputs) expected, the node has {len(node.input)}")


def tensor_array(t: TensorProto, node: onnx.NodeProto | None = None, what: str = "") -> np.ndarray:
    """The values of an initializer held in the model, after checking that its element type is known, its dims are
    non-negative and its data (raw or typed) holds exactly the number of elements the dims give."""
    where = f"{node_label(node)}: " if node is not None else ""
    label = f"{where}{what + ' ' if what else ''}initializer '{t.name}'"
    if t.data_location == TensorProto.EXTERNAL:
        raise ModelError(f"{label} is stored as external data (read only by onnxruntime, from the model's folder)")
    try:
        itemsize = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        raise ModelError(f"{label} has an unknown element type {t.data_type}") from None
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise ModelError(f"{label} has negative dimensions {dims}")
    count = math.prod(dims)
    if t.HasField("raw_data") and t.data_type not in (TensorProto.STRING,):
        bits = 4 if t.data_type in _PACKED_4BIT else itemsize * 8
        want = (count * bits + 7) // 8
        if len(t.raw_data) != want:
            raise ModelError(f"{label}: raw data has {len(t.raw_data)} bytes, its dims {dims} need {want}")
    try:
        a = numpy_helper.to_array(t)
    except (ValueError, TypeError, IndexError, OverflowError, KeyError, MemoryError) as e:
        raise ModelError(f"{label} cannot be decoded (dims {dims}, type {t.data_type}): {e}") from None
    if a.size != count:
        raise ModelError(f"{label}: holds {a.size} values, its dims {dims} need {count}")
    return a


_PACKED_4BIT = tuple(getattr(TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(TensorProto, n))


def standard_node_problem(node: onnx.NodeProto, model: onnx.ModelProto) -> str | None:
    """Why onnxruntime would refuse a default-domain node against the ONNX schema at the model's opset (input and
    output counts, unknown attributes, attribute types), or None. A transform that folds such a node away checks
    this first: onnxruntime never sees the folded node, so it could not refuse it."""
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
    if opset is None:
        return "the model does not import the default domain"
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = int(model.ir_version) or onnx.IR_VERSION
    ctx.opset_imports = {"": opset}
    try:
        onnx.checker.check_node(node, ctx)
    except (onnx.checker.ValidationError, onnx.defs.SchemaError) as e:
        return f"{node_label(node)}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    # Flags the schema types as INT: onnx's shape inference reads them as 32-bit values (-2^63 is 0 there) while
    # onnxruntime's kernels test the 64-bit value (and refuse a MaxPool storage_order other than 0 or 1), so a file
    # with another value than 0 or 1 is judged two ways.
    for name in _FLAG_ATTRS.get(node.op_type, ()):
        a = next((a for a in node.attribute if a.name == name), None)
        if a is not None and a.type == onnx.AttributeProto.INT and a.i not in (0, 1):
            return f"{node_label(node)}: attribute '{name}' is {a.i}, not 0 or 1"
    return None


_FLAG_ATTRS = {"Gemm": ("transA", "transB"), "BatchNormalization": ("training_mode",), "MaxPool": ("storage_order",)}
