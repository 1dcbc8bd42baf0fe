"""Helpers shared by the graph transforms (no transform logic here)."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")
LINGER_DOMAINS = ("thinker", "onnxinfer")
STANDARD_DOMAINS = ("", "ai.onnx")


class ModelError(ValueError):
    """A model that ortquant cannot run as written (the message names the node and the problem)."""


def opset_version(model: onnx.ModelProto, domain: str) -> int | None:
    """The version ``model`` imports ``domain`` at, or None when it does not import it."""
    for imp in model.opset_import:
        if imp.domain == domain:
            return int(imp.version)
    return None


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph`` and of its subgraphs (If/Loop/Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from all_nodes(g)


def copy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A deep copy: transforms never modify the model they are given."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def input_readers(nodes: list[onnx.NodeProto]) -> dict[str, list[tuple[int, int]]]:
    """Per value name, the (node index, input index) pairs that read it, in node order (empty names skipped)."""
    readers: dict[str, list[tuple[int, int]]] = {}
    for i, n in enumerate(nodes):
        for k, v in enumerate(n.input):
            if v:
                readers.setdefault(v, []).append((i, k))
    return readers


def producers(nodes: list[onnx.NodeProto]) -> dict[str, int]:
    """Per value name, the index of the node that produces it."""
    return {o: i for i, n in enumerate(nodes) for o in n.output if o}


def node_readers(nodes: list[onnx.NodeProto]) -> dict[str, list[int]]:
    """Per value name, the indices of the nodes that read it, once per read (a node reading a value twice is listed
    twice, so that "read by node i alone" is ``== [i]``)."""
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for v in n.input:
            readers.setdefault(v, []).append(i)
    return readers


def set_nodes(graph: onnx.GraphProto, nodes: list[onnx.NodeProto], stale: set[str]) -> None:
    """Replace the graph's nodes by ``nodes`` and drop the ``value_info`` entries of the values in ``stale`` (values
    a rewrite removed, or whose shape it changed)."""
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def static_shape(graph: onnx.GraphProto | None, name: str) -> list[int | None] | None:
    """The shape ``infer_shapes`` gave ``name`` in ``graph`` (None per unknown dim), or None when its rank is
    unknown (or ``graph`` is None)."""
    if graph is None:
        return None
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.name == name and vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    return None


def infer_shapes(
    model: onnx.ModelProto, *, data_prop: bool = False, errors: list[str] | None = None
) -> onnx.GraphProto | None:
    """The top-level graph of ``model`` after onnx shape inference (``strict_mode=False``), or None when inference
    fails; never raises.

    ortquant's op schemas are registered first (without them no custom-op output is typed). Domains that nodes use
    (subgraphs included) without an ``opset_import`` entry are imported at version 1 on a copy: onnxruntime runs
    such files (qonnx's QKeras converter writes them), but onnx shape inference refuses them outright and would
    give no shape at all. ``model`` itself is not modified. ``data_prop``: onnx's data propagation (shapes computed
    by Shape/Gather/Concat ... chains). ``errors``: when given, the message of a failure is appended to it.
    """
    from ortquant.schemas import register_schemas  # schemas are registered lazily, where needed

    register_schemas()
    imported = {o.domain for o in model.opset_import}
    missing = sorted({n.domain for n in all_nodes(model.graph)} - imported - set(STANDARD_DOMAINS))
    if missing:
        model = copy_model(model)
        model.opset_import.extend(onnx.helper.make_opsetid(d, 1) for d in missing)
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=data_prop).graph
        from ortquant.schemas._builder import PYTHON_INFERENCE

        return graph if PYTHON_INFERENCE else _infer_custom_outputs(model, graph, data_prop)
    except Exception as e:  # best effort: the caller decides what unknown shapes mean
        if errors is not None:
            errors.append(str(e))
        return None


def _infer_custom_outputs(model: onnx.ModelProto, graph: onnx.GraphProto, data_prop: bool) -> onnx.GraphProto:
    """onnx before 1.19 (no Python inference functions): the custom ops' outputs typed by their schemas' inference
    functions, called here, then onnx's inference again from them; until nothing new is typed."""
    from ortquant.schemas._builder import INFER, InferenceContext

    def shaped(tp: onnx.TypeProto) -> bool:
        return tp.HasField("tensor_type") and tp.tensor_type.HasField("shape")

    copied = False
    for _ in range(len(model.graph.node) + 1):
        types = {
            vi.name: vi.type
            for vi in [*graph.input, *graph.value_info, *graph.output]
            if vi.type.HasField("tensor_type")
        }
        for t in model.graph.initializer:
            types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
        added: dict[str, onnx.TypeProto] = {}
        for node in graph.node:
            infer = INFER.get((node.domain, node.op_type))
            if infer is None or all(not o or (o in types and shaped(types[o])) for o in node.output):
                continue
            ctx = InferenceContext(node, types)
            try:
                infer(ctx)
            except Exception:  # as the schemas' own wrapper: an unknown type stays unknown
                continue
            for i, tp in ctx.outputs.items():
                name = node.output[i] if i < len(node.output) else ""
                if name and shaped(tp) and not (name in types and shaped(types[name])):
                    added[name] = tp
        if not added:
            break
        if not copied:
            model = copy_model(model)
            copied = True
        keep = [vi for vi in model.graph.value_info if vi.name not in added]
        del model.graph.value_info[:]
        model.graph.value_info.extend(keep)
        model.graph.value_info.extend(onnx.helper.make_value_info(n, tp) for n, tp in added.items())
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=data_prop).graph
    return graph


def element_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element types of the top-level graph's values: declared ones, then onnx shape inference (best effort)."""
    types: dict[str, int] = {}
    inferred = infer_shapes(model)
    if inferred is None:
        inferred = model.graph
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types


def value_shapes(model: onnx.ModelProto, *, initializers: bool = False) -> dict[str, tuple[int | None, ...]]:
    """Shapes of the top-level graph's values (None per unknown dim): declared ones and onnx shape inference (best
    effort); with ``initializers``, the initializers' dims too (where no value_info gives the name)."""
    graph = infer_shapes(model)
    if graph is None:
        graph = model.graph
    out: dict[str, tuple[int | None, ...]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim)
    if initializers:
        for t in model.graph.initializer:
            out.setdefault(t.name, tuple(int(d) for d in t.dims))
    return out


def fold_into_initializers(
    model: onnx.ModelProto, folded: list[int], tensors: list[onnx.TensorProto]
) -> onnx.ModelProto:
    """A copy of ``model`` without its top-level nodes at the indices ``folded``, with ``tensors`` (their outputs'
    values) as initializers, and without the initializers only those nodes read."""
    graph = model.graph
    out = copy_model(model)
    drop = set(folded)
    kept = [n for i, n in enumerate(out.graph.node) if i not in drop]
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(tensors)
    read = {i for k in folded for i in graph.node[k].input}
    used = {i for n in all_nodes(out.graph) for i in n.input} | {o.name for o in graph.output}
    keep = [t for t in out.graph.initializer if t.name not in read or t.name in used]
    if len(keep) != len(out.graph.initializer):
        del out.graph.initializer[:]
        out.graph.initializer.extend(keep)
    return out


def foldable_constants(graph: onnx.GraphProto, types: tuple[int, ...]) -> dict[str, onnx.TensorProto]:
    """The initializers a fold may read as constants: of an element type in ``types``, held in the model (not
    external data) and not also graph inputs (those can be fed)."""
    inputs = {i.name for i in graph.input}
    return {
        t.name: t
        for t in graph.initializer
        if t.name not in inputs and t.data_location != onnx.TensorProto.EXTERNAL and t.data_type in types
    }
