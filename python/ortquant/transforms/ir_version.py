"""Rewrite: a model stamped with an IR version newer than onnxruntime reads, that uses nothing of it, gets the
oldest IR version that holds what it uses.

onnx 1.23's ``helper.make_model`` stamps IR version 14 (and tools built on it, qonnx's own model builders among
them, write what it stamps); onnxruntime 1.31 reads at most 13 and refuses the file ("Unsupported model IR
version: 14, max supported IR version: 13") although the IR versions after 10 only add element types and
multi-device fields: 11 FLOAT4E2M1 and device configurations, 12 FLOAT8E8M0, 13 UINT2 / INT2, 14 FLOAT6E2M3 /
FLOAT6E3M2 and opaque types outside ONNX-ML builds (onnx.proto). A model whose IR version is above
``NEWEST_READ`` gets ``max(10, the newest IR its element types and fields need)`` when that is at most
``NEWEST_READ``: every type, attribute and field it has means the same there (IR 10 is what onnxruntime 1.19,
the oldest this library loads in, reads). Anything else is left as it is (onnxruntime then says what it
refuses). Every element type is looked at: initializers (sparse ones too), attribute tensors, the types of graph
inputs, outputs and value_info (inside sequences, maps and optionals), the integer attributes that name a type
(``to``, ``dtype``, ``output_dtype``, ``stash_type``), in every subgraph and local function. Returns ``model``
itself when nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

from ortquant.transforms._util import copy_model

# The newest IR version the onnxruntime this project ships with (1.31) reads.
NEWEST_READ = 13
FLOOR = 10
# Element types (TensorProto.DataType) newer than IR 10: the IR version that added each.
_TYPE_IR = {23: 11, 24: 12, 25: 13, 26: 13, 27: 14, 28: 14}
_NEWEST_KNOWN_TYPE = 28  # a type code above this one is of an IR version this file does not know
_TYPE_ATTRS = ("to", "dtype", "output_dtype", "stash_type")


def _type_codes(t: onnx.TypeProto) -> Iterator[int]:
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        yield getattr(t, kind).elem_type
    elif kind == "sequence_type":
        yield from _type_codes(t.sequence_type.elem_type)
    elif kind == "optional_type":
        yield from _type_codes(t.optional_type.elem_type)
    elif kind == "map_type":
        yield t.map_type.key_type
        yield from _type_codes(t.map_type.value_type)
    elif kind is not None:
        yield _NEWEST_KNOWN_TYPE + 1  # opaque (IR 14 outside ONNX-ML) or a kind newer than this file


def _graph_codes(g: onnx.GraphProto) -> Iterator[int]:
    for t in g.initializer:
        yield t.data_type
    for st in g.sparse_initializer:
        yield st.values.data_type
    for vi in [*g.input, *g.output, *g.value_info]:
        if vi.HasField("type"):
            yield from _type_codes(vi.type)
    yield from _nodes_codes(g.node)


def _nodes_codes(nodes: Iterable[onnx.NodeProto]) -> Iterator[int]:
    for n in nodes:
        if len(n.device_configurations):
            yield -11  # multi-device fields: IR 11
        for a in n.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in _TYPE_ATTRS:
                yield int(a.i)
            elif a.type == onnx.AttributeProto.TENSOR:
                yield a.t.data_type
            elif a.type == onnx.AttributeProto.TENSORS:
                yield from (t.data_type for t in a.tensors)
            elif a.type == onnx.AttributeProto.SPARSE_TENSOR:
                yield a.sparse_tensor.values.data_type
            elif a.type == onnx.AttributeProto.TYPE_PROTO:
                yield from _type_codes(a.tp)
            elif a.type == onnx.AttributeProto.GRAPH:
                yield from _graph_codes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _graph_codes(sub)


def needed_ir_version(model: onnx.ModelProto) -> int | None:
    """The oldest IR version, at least 10, that holds every element type and field the model uses; None when it
    uses something this module does not know (a type code above FLOAT6E3M2, an opaque type)."""
    need = FLOOR
    codes = [*_graph_codes(model.graph)]
    for f in model.functions:
        codes.extend(_nodes_codes(f.node))
        for vi in f.value_info:
            if vi.HasField("type"):
                codes.extend(_type_codes(vi.type))
    if len(model.configuration) or len(model.training_info):
        return None  # multi-device (IR 11) or training fields: left as they are
    for c in codes:
        if c == -11:
            need = max(need, 11)
        elif c > _NEWEST_KNOWN_TYPE:
            return None
        else:
            need = max(need, _TYPE_IR.get(c, FLOOR))
    return need


def fit_ir_version(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with the oldest IR version it can have, when its own is newer than onnxruntime reads (module
    doc); ``model`` itself otherwise."""
    if model.ir_version <= NEWEST_READ:
        return model
    need = needed_ir_version(model)
    if need is None or need > NEWEST_READ:
        return model
    out = copy_model(model)
    out.ir_version = need
    return out
