"""Integer-mode rule: consecutive integer-mode layers, each read only by the next, run as one ``QChain`` node::

    X -> QConvCodes(X, W0, S0, B0) -> c0 -> QConvCodes(c0, W1, S1, B1) -> c1 -> QGemm(c1, W2, S2, B2) -> Y
      =>  X -> QChain(X, W0, S0, B0, W1, S1, B1, W2, S2, B2; steps = "QConvCodes QConvCodes QGemm") -> Y

onnxruntime spends about half a microsecond on each custom-op node around its kernel, as much as a small layer's
arithmetic; the chain's kernel runs the same steps' kernels one after the other inside one node (docs/ops.md,
``QChain``), so the values and the bits are those of the nodes it replaces. A step is a ``QConv``, ``QConvCodes``,
``QGemm``, ``QGemmCodes`` (without a residual input: its W, S and B initializers are its only other inputs),
``MaxPoolCodes`` or ``AvgPoolCodes`` of the ``ortquant.integer`` domain; a step's output must be read by the next
step's X alone, not be a graph output, and be known (onnx shape inference) to take at most ``MAX_STEP_BYTES`` per
image. Each step's attributes are copied as ``__<step>_<name>`` (names the ONNX
checker leaves to the op), the names of the values between the steps kept in ``step_values``; the chain's output is
the last step's (``QChainCodes`` when it is int8 codes). ``unchain`` gives the steps back as nodes. Returns
``model`` itself when no two steps chain.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ortquant.transforms._util import copy_model, infer_shapes, node_readers, producers, set_nodes

INTEGER_DOMAIN = "ortquant.integer"
# The largest value (bytes per image) a chain keeps between two steps. The node cost a chain saves matters next to
# layers of a few microseconds, whose values are small; a chain over large images measured slower than the same
# layers as nodes (exm_separable's 512 x 512 layers 1.03-1.05x the time on Zen 4), so those stay nodes.
MAX_STEP_BYTES = 256 * 1024
# Per op a step may be: its constant inputs after X, and whether it writes int8 codes.
_STEPS: dict[str, tuple[int, bool]] = {
    "QConv": (3, False),
    "QConvCodes": (3, True),
    "QGemm": (3, False),
    "QGemmCodes": (3, True),
    "MaxPoolCodes": (0, True),
    "AvgPoolCodes": (0, False),
}


def _step(node: onnx.NodeProto, inits: set[str]) -> bool:
    """Whether ``node`` can be a chain step: one of _STEPS with its constants and nothing else."""
    if node.domain != INTEGER_DOMAIN or node.op_type not in _STEPS or len(node.output) != 1 or not node.input:
        return False
    constants = _STEPS[node.op_type][0]
    return len(node.input) == 1 + constants and all(v in inits for v in node.input[1:]) and bool(node.input[0])


def fuse_integer_chain(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each maximal chain of two or more integer-mode steps by one ``QChain`` / ``QChainCodes`` node; see
    the module doc."""
    nodes = list(model.graph.node)
    inits = {t.name for t in model.graph.initializer}
    ok = [_step(n, inits) for n in nodes]
    if sum(ok) < 2:
        return model
    producer = producers(nodes)
    readers = node_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    inferred = infer_shapes(model)
    shapes = {
        vi.name: vi.type.tensor_type
        for vi in ([*inferred.value_info, *inferred.output] if inferred is not None else [])
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")
    }

    def small(v: str) -> bool:
        """Whether value v is known to take at most MAX_STEP_BYTES per image (all but its first dimension)."""
        t = shapes.get(v)
        if t is None or len(t.shape.dim) < 1 or any(not d.HasField("dim_value") for d in t.shape.dim[1:]):
            return False
        size = 1 if t.elem_type == onnx.TensorProto.INT8 else 4
        for d in t.shape.dim[1:]:
            size *= d.dim_value
        return size <= MAX_STEP_BYTES

    def next_step(i: int) -> int | None:
        """The step that reads node i's output as its X, when it is that output's only reader and small."""
        v = nodes[i].output[0]
        if v in outputs or len(readers.get(v, [])) != 1 or not small(v):
            return None
        j = readers[v][0]
        return j if ok[j] and nodes[j].input[0] == v else None

    chains: list[list[int]] = []
    for i, n in enumerate(nodes):
        if not ok[i]:
            continue
        p = producer.get(n.input[0])
        if p is not None and ok[p] and next_step(p) == i:
            continue  # not a chain's first step
        chain = [i]
        while (j := next_step(chain[-1])) is not None:
            chain.append(j)
        if len(chain) >= 2:
            chains.append(chain)
    if not chains:
        return model

    out = copy_model(model)
    g = out.graph
    replaced: dict[int, onnx.NodeProto] = {}
    drop: set[int] = set()
    stale: set[str] = set()
    for chain in chains:
        steps = [g.node[i] for i in chain]
        inputs = [steps[0].input[0]] + [v for s in steps for v in s.input[1:]]
        attrs = [
            helper.make_attribute("steps", " ".join(s.op_type for s in steps)),
            helper.make_attribute("step_inputs", [len(s.input) - 1 for s in steps]),
            # (not read by the kernel: the names of the values between the steps, for unchain)
            helper.make_attribute("step_values", [s.output[0] for s in steps[:-1]]),
        ]
        for k, s in enumerate(steps):
            for a in s.attribute:
                b = onnx.AttributeProto()
                b.CopyFrom(a)
                b.name = f"__{k}_{a.name}"
                attrs.append(b)
        last = steps[-1]
        op = "QChainCodes" if _STEPS[last.op_type][1] else "QChain"
        name = "+".join(s.name or s.output[0] for s in steps)
        fused = helper.make_node(op, inputs, [last.output[0]], name=name, domain=INTEGER_DOMAIN)
        fused.attribute.extend(attrs)
        replaced[chain[0]] = fused
        drop.update(chain[1:])
        stale.update(s.output[0] for s in steps[:-1])
    set_nodes(g, [replaced.get(i, n) for i, n in enumerate(g.node) if i not in drop], stale)
    return out


def unchain(nodes: list[onnx.NodeProto] | onnx.ModelProto) -> list[onnx.NodeProto]:
    """The nodes with every ``QChain`` / ``QChainCodes`` replaced by the steps it runs, in order: the nodes
    ``fuse_integer_chain`` replaced, with their names and the names of the values between them (its ``step_values``
    attribute). For reading a prepared model layer by layer."""
    if isinstance(nodes, onnx.ModelProto):
        nodes = list(nodes.graph.node)
    out: list[onnx.NodeProto] = []
    for n in nodes:
        if n.domain != INTEGER_DOMAIN or n.op_type not in ("QChain", "QChainCodes"):
            out.append(n)
            continue
        attrs = {a.name: a for a in n.attribute}
        ops = helper.get_attribute_value(attrs["steps"]).decode().split()
        counts = list(helper.get_attribute_value(attrs["step_inputs"]))
        names = n.name.split("+") if n.name.count("+") == len(ops) - 1 else [f"{n.name}@{k}" for k in range(len(ops))]
        values = (
            [v.decode() for v in helper.get_attribute_value(attrs["step_values"])] if "step_values" in attrs else []
        )
        if len(values) != len(ops) - 1:
            values = [f"{n.output[0]}@{k}" for k in range(len(ops) - 1)]
        at, value = 1, n.input[0]
        for k, (op, count) in enumerate(zip(ops, counts, strict=True)):
            y = n.output[0] if k == len(ops) - 1 else values[k]
            step = helper.make_node(op, [value, *n.input[at : at + count]], [y], name=names[k], domain=INTEGER_DOMAIN)
            prefix = f"__{k}_"
            for a in n.attribute:
                if a.name.startswith(prefix):
                    b = onnx.AttributeProto()
                    b.CopyFrom(a)
                    b.name = a.name[len(prefix) :]
                    step.attribute.append(b)
            out.append(step)
            at, value = at + count, y
    return out


__all__ = ["fuse_integer_chain", "unchain"]
