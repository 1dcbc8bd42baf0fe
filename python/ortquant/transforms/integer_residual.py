"""Integer-mode rule: the residual Add (and the Relu after it) behind a ``QConv`` is fused into the op (its
optional input ``R``)::

    QConv(relu = 0) -> y -> Add(y, r) -> s -> [Relu -> z]
      =>  QConv(R = r, relu = 1 if the Relu was there) -> z (or s)

The op adds ``r`` to each image's output while it is in cache (``core/integer/residual.h``) and applies the Relu
after the addition, so the convolution's float output is not written in full and read back by two more nodes. The
values are the same float32 additions (and maxima with 0) as the Add and Relu nodes.

Only an Add whose two operands have the same, fully known shape (onnx shape inference; the batch may be a named
dimension, the same on both sides) is fused, so no broadcasting is involved; the convolution's output must be read by
the Add alone and not be a graph output, the QConv must have no Relu of its own and no fused pool, and a Relu is
taken along only when it is the Add's one reader (and the Add's output no graph output). When both operands come
from such QConvs, the later one in the graph takes the other's output as ``R``. The fused op takes the Add's place
in the node list (after both operands are computed). Returns ``model`` itself when nothing is fused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import STANDARD_DOMAINS, copy_model, infer_shapes, node_readers, producers, set_nodes

INTEGER_DOMAIN = "ortquant.integer"


def _shapes(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """Fully known shapes (ints or dim_params) of the top-level graph's values, by onnx shape inference."""
    g = infer_shapes(model)  # QConv's output shape comes from its schema
    if g is None:
        return {}
    out: dict[str, list[int | str]] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
            continue
        dims: list[int | str] = []
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.dim_param:
                dims.append(d.dim_param)
            else:
                break
        else:
            out[vi.name] = dims
    return out


def fuse_integer_residual(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fuse each residual Add (and its Relu) behind a ``QConv`` into the op; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "QConv" and n.domain == INTEGER_DOMAIN for n in nodes):
        return model
    if not any(n.op_type == "Add" and n.domain in STANDARD_DOMAINS for n in nodes):
        return model
    producer = producers(nodes)
    readers = node_readers(nodes)
    outputs = {o.name for o in model.graph.output}

    def only_reader(value: str, i: int) -> bool:
        return readers.get(value, []) == [i] and value not in outputs

    def fusable_conv(value: str, add_i: int) -> int | None:
        ci = producer.get(value)
        if ci is None:
            return None
        c = nodes[ci]
        if c.op_type != "QConv" or c.domain != INTEGER_DOMAIN or len(c.input) > 4 or not only_reader(value, add_i):
            return None
        attrs = {a.name: a for a in c.attribute}
        if "pool" in attrs or ("relu" in attrs and attrs["relu"].i != 0):
            return None
        return ci

    shapes: dict[str, list[int | str]] | None = None
    plan: list[tuple[int, int, int | None, str]] = []  # (add, conv, relu or None, residual value)
    used: set[int] = set()
    for ai, add in enumerate(nodes):
        if add.op_type != "Add" or add.domain not in STANDARD_DOMAINS or len(add.input) != 2 or len(add.output) != 1:
            continue
        if _read.standard_node_problem(add, model) is not None:  # left for onnxruntime to refuse
            continue
        cands = [(fusable_conv(v, ai), 1 - k) for k, v in enumerate(add.input)]
        cands = [(ci, k) for ci, k in cands if ci is not None and ci not in used]
        if not cands:
            continue
        ci, other = max(cands)  # the later QConv: the other operand is computed before the Add either way
        if add.input[0] == add.input[1]:
            continue
        if shapes is None:
            shapes = _shapes(model)
        a, b = shapes.get(add.input[0]), shapes.get(add.input[1])
        if a is None or a != b or len(a) != 4:
            continue
        relu = None
        rs = readers.get(add.output[0], [])
        if len(rs) == 1 and add.output[0] not in outputs:
            r = nodes[rs[0]]
            if r.op_type == "Relu" and r.domain in STANDARD_DOMAINS and len(r.output) == 1:
                relu = rs[0] if _read.standard_node_problem(r, model) is None else None
        plan.append((ai, ci, relu, add.input[other]))
        used.add(ci)
    if not plan:
        return model

    out = copy_model(model)
    g = out.graph
    replace: dict[int, onnx.NodeProto] = {}
    drop: set[int] = set()
    stale: set[str] = set()
    for ai, ci, relu, residual in plan:
        conv = onnx.NodeProto()
        conv.CopyFrom(g.node[ci])
        stale.add(conv.output[0])
        del conv.input[4:]
        conv.input.append(residual)
        last = g.node[relu] if relu is not None else g.node[ai]
        conv.output[0] = last.output[0]
        kept = [a for a in conv.attribute if a.name != "relu"]
        del conv.attribute[:]
        conv.attribute.extend([*kept, helper.make_attribute("relu", 1 if relu is not None else 0)])
        replace[ai] = conv
        drop.add(ci)
        if relu is not None:
            drop.add(relu)
            stale.add(g.node[ai].output[0])
    set_nodes(g, [replace.get(i, n) for i, n in enumerate(g.node) if i not in drop], stale)
    return out


__all__ = ["fuse_integer_residual"]
