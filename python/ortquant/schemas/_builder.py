"""A small builder over ``onnx.defs.OpSchema`` shared by the per-family schema modules.

Each op is described once (inputs, outputs, attributes, an optional shape-inference function) and registered in
every domain of its family. Shape-inference functions never raise: when a shape is unknown they leave it unset,
so ``onnx.checker`` and ``onnx.shape_inference`` stay usable on partially known models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import onnx
from onnx import TensorProto, helper
from onnx.defs import OpSchema

AttrType = OpSchema.AttrType
Single = OpSchema.FormalParameterOption.Single
Optional = OpSchema.FormalParameterOption.Optional
Variadic = OpSchema.FormalParameterOption.Variadic

FLOATS = ["tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)"]
INTS = ["tensor(int8)", "tensor(uint8)", "tensor(int16)", "tensor(uint16)", "tensor(int32)", "tensor(int64)"]
NUMERIC = FLOATS + INTS + ["tensor(uint32)", "tensor(uint64)"]


@dataclass
class Param:
    """One input or output: name, type string (a type like ``tensor(float)`` or a constraint name)."""

    name: str
    type_str: str
    option: OpSchema.FormalParameterOption = Single
    doc: str = ""
    min_arity: int = 1
    homogeneous: bool = True


@dataclass
class Attr:
    """An attribute: required (no default) or optional with a default value (or ``type`` with no default)."""

    name: str
    type: AttrType
    default: object = None
    required: bool = False
    doc: str = ""


@dataclass
class Op:
    """Everything needed to build the schema of one op version."""

    name: str
    doc: str
    inputs: Sequence[Param]
    outputs: Sequence[Param]
    attrs: Sequence[Attr] = ()
    constraints: Sequence[tuple[str, Sequence[str], str]] = ()
    infer: Callable[[onnx.shape_inference.InferenceContext], None] | None = None
    since_version: int = 1
    extra: dict[str, object] = field(default_factory=dict)


def _attribute(a: Attr) -> OpSchema.Attribute:
    if a.required:
        return OpSchema.Attribute(a.name, a.type, a.doc, required=True)
    if a.default is None:
        return OpSchema.Attribute(a.name, a.type, a.doc, required=False)
    return OpSchema.Attribute(a.name, _default_attr(a), a.doc)


def _default_attr(a: Attr) -> onnx.AttributeProto:
    return helper.make_attribute(a.name, a.default, attr_type=_proto_attr_type(a.type))


def _proto_attr_type(t: AttrType) -> int:
    return {
        AttrType.INT: onnx.AttributeProto.INT,
        AttrType.FLOAT: onnx.AttributeProto.FLOAT,
        AttrType.STRING: onnx.AttributeProto.STRING,
        AttrType.INTS: onnx.AttributeProto.INTS,
        AttrType.FLOATS: onnx.AttributeProto.FLOATS,
        AttrType.STRINGS: onnx.AttributeProto.STRINGS,
        AttrType.TENSOR: onnx.AttributeProto.TENSOR,
    }[t]


# Every schema register_ops registered, as (name, since_version, domain): removed again at interpreter exit
# (register_schemas), and the inference functions by (domain, name), for onnx versions that cannot call them.
REGISTERED: list[tuple[str, int, str]] = []
INFER: dict[tuple[str, str], Callable[[onnx.shape_inference.InferenceContext], None]] = {}
# onnx 1.19 and later call Python inference functions; before, a schema cannot hold one.
PYTHON_INFERENCE = hasattr(OpSchema, "set_type_and_shape_inference_function")


def build(op: Op, domain: str) -> OpSchema:
    """The OpSchema of ``op`` in ``domain``."""
    schema = OpSchema(
        op.name,
        domain,
        op.since_version,
        op.doc,
        inputs=[
            OpSchema.FormalParameter(
                p.name, p.type_str, p.doc, param_option=p.option, is_homogeneous=p.homogeneous, min_arity=p.min_arity
            )
            for p in op.inputs
        ],
        outputs=[
            OpSchema.FormalParameter(
                p.name, p.type_str, p.doc, param_option=p.option, is_homogeneous=p.homogeneous, min_arity=p.min_arity
            )
            for p in op.outputs
        ],
        type_constraints=[(n, list(t), d) for n, t, d in op.constraints],
        attributes=[_attribute(a) for a in op.attrs],
    )
    if op.infer is not None:
        INFER[(domain, op.name)] = op.infer
    # onnx before 1.19 cannot take a Python inference function: transforms._util.infer_shapes then applies INFER
    # itself between rounds of onnx's inference.
    if op.infer is not None and PYTHON_INFERENCE:
        infer = op.infer

        def safe(ctx: onnx.shape_inference.InferenceContext) -> None:
            try:
                infer(ctx)
            except Exception:
                return

        schema.set_type_and_shape_inference_function(safe)
    return schema


def register_ops(ops: Iterable[Op], domains: Iterable[str]) -> None:
    """Register every op in every domain, skipping (domain, name, version) triples already registered."""
    for domain in domains:
        for op in ops:
            try:
                existing = onnx.defs.get_schema(op.name, op.since_version, domain)
            except onnx.defs.SchemaError:
                existing = None
            if existing is not None and existing.since_version == op.since_version:
                continue
            onnx.defs.register_schema(build(op, domain))
            REGISTERED.append((op.name, op.since_version, domain))


class InferenceContext:
    """The part of ``onnx.shape_inference.InferenceContext`` the inference functions here use, over one node and
    the types known so far (for onnx versions that cannot call Python inference functions)."""

    def __init__(self, node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> None:
        self.node = node
        self.types = types
        self.outputs: dict[int, onnx.TypeProto] = {}

    def get_num_inputs(self) -> int:
        return len(self.node.input)

    def get_num_outputs(self) -> int:
        return len(self.node.output)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def get_input_type(self, i: int) -> onnx.TypeProto | None:
        return self.types.get(self.node.input[i]) if self.has_input(i) else None

    def get_attribute(self, name: str) -> onnx.AttributeProto | None:
        return next((a for a in self.node.attribute if a.name == name), None)

    def set_output_type(self, i: int, tp: onnx.TypeProto) -> None:
        self.outputs[i] = tp


# ---- shape-inference helpers --------------------------------------------------------------------------------


def input_shape(ctx: onnx.shape_inference.InferenceContext, i: int) -> list[int | str | None] | None:
    """Input i's dims (int, symbolic name or None for unknown), or None if the rank is unknown."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    t = ctx.get_input_type(i)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def input_elem_type(ctx: onnx.shape_inference.InferenceContext, i: int) -> int:
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return TensorProto.UNDEFINED
    t = ctx.get_input_type(i)
    if t is None or not t.HasField("tensor_type"):
        return TensorProto.UNDEFINED
    return t.tensor_type.elem_type


def attr(ctx: onnx.shape_inference.InferenceContext, name: str, default: object = None) -> object:
    a = ctx.get_attribute(name)
    if a is None:
        return default
    return helper.get_attribute_value(a)


def set_output(
    ctx: onnx.shape_inference.InferenceContext, i: int, elem_type: int, shape: Sequence[int | str | None] | None
) -> None:
    """Set output i's element type and (if known) shape."""
    if elem_type == TensorProto.UNDEFINED:
        return
    if shape is None:
        tp = helper.make_tensor_type_proto(elem_type, None)
    else:
        tp = helper.make_tensor_type_proto(elem_type, list(shape))
    ctx.set_output_type(i, tp)


def broadcast(shapes: Sequence[Sequence[int | str | None] | None]) -> list[int | str | None] | None:
    """numpy broadcast of possibly symbolic shapes; None if any rank is unknown."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[int | str | None] = [1] * rank
    for s in shapes:
        assert s is not None
        for k, d in enumerate(s):
            o = rank - len(s) + k
            if d == 1:
                continue
            if out[o] == 1:
                out[o] = d
            elif out[o] != d:
                if isinstance(d, int) and isinstance(out[o], int):
                    raise ValueError("shapes do not broadcast")
                out[o] = None
    return out


def infer_broadcast(inputs: Sequence[int], elem_type: int | None = None, type_from: int = 0):
    """An inference function: output 0 has the broadcast shape of ``inputs`` and the type of input
    ``type_from`` (or the fixed ``elem_type``)."""

    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        et = elem_type if elem_type is not None else input_elem_type(ctx, type_from)
        set_output(ctx, 0, et, broadcast([input_shape(ctx, i) for i in inputs]))

    return infer


def infer_same_as_input(i: int = 0, n_outputs: int = 1):
    """An inference function: every output has input i's type and shape."""

    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        for o in range(min(n_outputs, ctx.get_num_outputs())):
            set_output(ctx, o, input_elem_type(ctx, i), input_shape(ctx, i))

    return infer
