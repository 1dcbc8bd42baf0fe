"""Rewrite: declared element types that contradict what ortquant's ops produce (linger exports from torch 2.x).

linger's exporter on a current torch writes ``value_info`` with float types for the outputs of custom ops that
produce int8/int16/int32 (``LinearInt``, ``Conv2dInt`` ...), and for the standard ops that pass those values on.
onnxruntime obeys the declaration and refuses the model ("Type (tensor(float)) of output arg ... does not match
expected type (tensor(int8))"). The types our ops produce are known: every ortquant op has an ONNX schema with
type inference (``ortquant.schemas``), so this transform infers the types of a copy without ``value_info`` and

- drops each ``value_info`` entry whose element type contradicts the inferred one (shape information is lost for
  those values only; onnxruntime infers it again);
- drops each ``value_info`` entry whose rank contradicts the one inferred from the graph inputs (a model whose input
  rank was edited without the declarations behind it: onnxruntime's MatMul + Add fusion trusts a stale 2-D
  declaration, makes a Gemm and fails at run time on the 3-D values);
- sets a graph output's element type to the inferred one when the output is declared float, is inferred as an
  integer type (int8/uint8/int16/int32) and is produced, directly or through standard ops, by a custom-domain node:
  exactly the exporter bug's signature. Any other contradicting graph output (e.g. int8 declared for a 16-bit
  Quant, or an output of a purely standard subgraph) is a real mistake in the model and is left for onnxruntime to
  report, naming the node.

Values whose type inference cannot determine keep their declaration. Returns ``model`` itself when nothing
contradicts.
"""

from __future__ import annotations

import onnx

from ortquant.transforms._util import LINGER_DOMAINS, QONNX_DOMAINS, STANDARD_DOMAINS, copy_model, infer_shapes

_CUSTOM = (*QONNX_DOMAINS, *LINGER_DOMAINS, "ngraph")
_INT_TYPES = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32)


def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` without weights: each initializer becomes a graph input of its type and shape (element types do not
    depend on values, and inference then serializes kilobytes instead of the weights)."""
    bare = onnx.ModelProto()
    bare.ir_version = model.ir_version
    bare.opset_import.extend(model.opset_import)  # domains used without an import: infer_shapes adds them
    g = bare.graph
    g.node.extend(model.graph.node)
    g.input.extend(model.graph.input)
    g.output.extend(model.graph.output)
    names = {i.name for i in model.graph.input}
    for t in model.graph.initializer:
        if t.name not in names:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return bare


def _inferred(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, int]]:
    """(element type, rank) of every value onnx shape inference determines from the graph inputs alone (the
    declarations of ``value_info`` and of the outputs ignored)."""
    bare = _skeleton(model)
    for out in bare.graph.output:  # outputs are inferred too, not taken from the declaration
        out.type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED
        out.type.tensor_type.ClearField("shape")
    inferred = infer_shapes(bare)  # with ortquant's schemas: otherwise no custom-op output is typed
    if inferred is None:
        return {}, {}
    types: dict[str, int] = {}
    ranks: dict[str, int] = {}
    for vi in [*inferred.value_info, *inferred.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
    return types, ranks


def _from_custom_node(model: onnx.ModelProto) -> set[str]:
    """Values produced by a custom-domain node, or by a standard node one of whose inputs is such a value."""
    out: set[str] = set()
    for node in model.graph.node:  # topological order (ONNX requires it)
        if node.domain in _CUSTOM or (node.domain in STANDARD_DOMAINS and any(i in out for i in node.input)):
            out.update(o for o in node.output if o)
    return out


_Inferred = tuple[dict[str, int], dict[str, int]]


def contradictions(model: onnx.ModelProto, inferred_: _Inferred | None = None) -> list[tuple[str, int, int, bool]]:
    """(value name, declared type, inferred type, is a graph output) for every contradicting declaration
    (``inferred_``: ``_inferred(model)`` when the caller has it)."""
    if not any(n.domain in _CUSTOM for n in model.graph.node):
        return []
    declared = [(vi, False) for vi in model.graph.value_info] + [(vi, True) for vi in model.graph.output]
    if not declared:
        return []
    inferred = (inferred_ or _inferred(model))[0]
    custom = _from_custom_node(model)
    found = []
    for vi, is_output in declared:
        want = inferred.get(vi.name)
        have = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if not want or not have or want == have:
            continue
        if is_output and (vi.name not in custom or have != onnx.TensorProto.FLOAT or want not in _INT_TYPES):
            continue
        found.append((vi.name, have, want, is_output))
    return found


def rank_contradictions(model: onnx.ModelProto, inferred_: _Inferred | None = None) -> list[str]:
    """The ``value_info`` entries whose declared rank differs from the rank shape inference gives them from the graph
    inputs (a graph input's rank edited without the declarations behind it)."""
    if not any(n.domain in _CUSTOM for n in model.graph.node):
        return []
    declared = [vi for vi in model.graph.value_info
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")]  # fmt: skip
    if not declared:
        return []
    ranks = (inferred_ or _inferred(model))[1]
    return [vi.name for vi in declared if vi.name in ranks and ranks[vi.name] != len(vi.type.tensor_type.shape.dim)]


def fix_declared_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop contradicting ``value_info`` entries (element type or rank) and correct contradicting custom-op graph
    outputs."""
    if not any(n.domain in _CUSTOM for n in model.graph.node) or not (model.graph.value_info or model.graph.output):
        return model
    inferred = _inferred(model)
    found = contradictions(model, inferred)
    stale_ranks = rank_contradictions(model, inferred)
    if not found and not stale_ranks:
        return model
    out = copy_model(model)
    drop = {name for name, _, _, is_output in found if not is_output} | set(stale_ranks)
    fix = {name: want for name, _, want, is_output in found if is_output}
    kept = [vi for vi in out.graph.value_info if vi.name not in drop]
    del out.graph.value_info[:]
    out.graph.value_info.extend(kept)
    for vi in out.graph.output:
        if vi.name in fix:
            vi.type.tensor_type.elem_type = fix[vi.name]
    return out
