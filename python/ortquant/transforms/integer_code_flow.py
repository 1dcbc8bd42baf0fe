"""Integer-mode rule: int8 codes through the quantizers, pools, resizes and joins between layers (the skip
connections and upsampling of U-Nets and separable stacks)::

    QConv -> y -> Quant(A) -> [Quant | LeakyRelu | Relu | MaxPool | Resize(nearest) | Concat | Reshape ...]*
          -> QConv(act_* = C) ...
      =>  QConvCodes(out_act_* = A, out_table = T) -> [MaxPoolCodes | Resize | Concat | Reshape ...]*
          -> QConv(act_* = C) ...

The values after ``Quant(A)`` lie on A's grid: A's codes stand for them exactly. Every per-element step between
that Quant and the layers that read the values (other Quants, LeakyRelu, Relu, and the readers' own quantizer C) is
then a function of the code alone, a table ``T`` of at most 256 entries from A's codes to C's, computed here by
running those steps (the library's Quant kernel, onnxruntime's ``y >= 0 ? y : alpha * y`` LeakyRelu) on the float32
value of every code. The producing layer writes ``T(code)`` directly (QConvCodes' ``out_table``; none when ``T`` is
the identity); the steps that only move elements run on the int8 codes: nearest Resize, Concat and the shape ops as
onnxruntime's own int8 kernels, MaxPool as ``MaxPoolCodes`` (the max of codes is the code of the max: every step is
non-decreasing then). The readers take C's codes as their input. Every output keeps its bits; what goes is the
float32 tensors between the layers (4 bytes an element instead of 1), the standalone Quant / LeakyRelu passes and
the readers' quantizer pass.

Works on a region: the values reachable from such a Quant through those steps, joined by Concat (each of its inputs
must come from a region source too). Applied to a region when: every source is a ``QConv`` (domain
``ortquant.integer``, float32 output) read only by one QONNX ``Quant`` / ``IntQuant`` of at most 8 bits with scalar
constant parameters; every value on the way is read only by steps of the region or by ``QConv`` / ``QConvCodes``
layers as their input ``X`` (not a graph output); the readers share one quantizer C of at most 8 bits (not
bipolar, not a binary-weight layer); every path from a source gives it the same table; a MaxPool has
``kernel_shape == strides``, no pads or dilation, floor rounding, one output (and then LeakyRelu's alpha >= 0); a
Resize has mode ``nearest``; the default-domain opset is at least 11. Values that now hold codes are renamed
(``<name>__codes``) and their float32 ``value_info`` dropped. Returns ``model`` itself when nothing applies.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._integer_common import SkipError
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS, copy_model, set_nodes
from ortquant.transforms.integer_codes import _ACT_DEFAULTS, _act, _binary_weights, _canonical, rename_codes
from ortquant.transforms.lower_integer import _activation, _Graph

INTEGER_DOMAIN = "ortquant.integer"
_QUANTS = ("Quant", "IntQuant")
_MOVERS = ("Squeeze", "Unsqueeze", "Reshape", "Flatten", "Resize", "Concat", "MaxPool")
_ELEMENTWISE = ("LeakyRelu", "Relu")


class _NoRegionError(Exception):
    """The region cannot carry codes (the message says why, for debugging)."""


def _stored(act: dict[str, object]) -> tuple[int, int, int]:
    """(offset, lowest a, highest a) of the quantizer's values a = q - z as integer mode stores them, c = a - offset
    (the library's make_act_quant then nonneg_codes: offset = min(a) when every a and 0 lie within 127 of each other,
    else 0 when every a is an int8, else min(a) + 128, e.g. 128 for an unsigned 8-bit quantizer with zero point 0)."""
    bits, signed, narrow = int(act["act_bits"]), int(act["act_signed"]), int(act["act_narrow"])  # type: ignore[call-overload]
    z = int(float(act["act_zeropt"]))  # type: ignore[arg-type]
    lo, hi = (-(2 ** (bits - 1)) + narrow, 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1 - narrow)
    vmin, vmax = lo - z, hi - z
    lo0, hi0 = min(vmin, 0), max(vmax, 0)
    if hi0 - lo0 <= 127:
        return lo0, vmin, vmax
    return (0 if -128 <= vmin and vmax <= 127 else vmin + 128), vmin, vmax


def _quantize(x: np.ndarray, act: dict[str, object]) -> np.ndarray:
    """QONNX Quant of x (float32) by the act_* quantizer, with the library's kernel: float32 values."""
    from ortquant import _C

    mode = act["act_rounding_mode"]
    return np.asarray(
        _C.quant(
            x.astype(np.float32),
            np.array(act["act_scale"], dtype=np.float32),
            np.array(act["act_zeropt"], dtype=np.float32),
            np.array(act["act_bits"], dtype=np.float32),
            signed=bool(act["act_signed"]),
            narrow=bool(act["act_narrow"]),
            rounding_mode=mode.decode() if isinstance(mode, bytes) else str(mode),
        ),
        dtype=np.float32,
    )


def flow_integer_codes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Carry int8 codes from layer to layer through quantizers, pools, resizes and joins; see the module doc."""
    nodes = list(model.graph.node)
    if not any(n.op_type == "QConv" and n.domain == INTEGER_DOMAIN for n in nodes):
        return model
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 0)
    if opset < 11:
        return model
    readers: dict[str, list[tuple[int, int]]] = {}
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for k, v in enumerate(n.input):
            if v:
                readers.setdefault(v, []).append((i, k))
        for v in n.output:
            if v:
                producer[v] = i
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}
    graph = _Graph(model)
    original = model

    def quantizer(j: int) -> dict[str, object]:
        """The act_* values of Quant node j (canonical), or _NoRegionError."""
        q = nodes[j]
        if not q.output or not q.output[0]:
            raise _NoRegionError("a Quant without output")
        try:
            act, x, chain, _ = _activation(graph, q.output[0])
        except (SkipError, ValueError) as e:
            raise _NoRegionError(str(e)) from e
        if chain or x != q.input[0]:
            raise _NoRegionError("not a plain Quant")
        return _canonical({**_ACT_DEFAULTS, "act_bits": 8, **act})

    def is_quant(n: onnx.NodeProto) -> bool:
        return n.domain in QONNX_DOMAINS and n.op_type in _QUANTS

    def source_of(j: int) -> int | None:
        """The QConv feeding Quant node j when (QConv, Quant) is a region source, else None."""
        p = producer.get(nodes[j].input[0]) if nodes[j].input else None
        if p is None:
            return None
        conv = nodes[p]
        if conv.op_type != "QConv" or conv.domain != INTEGER_DOMAIN or not conv.output:
            return None
        y = conv.output[0]
        return p if y not in outputs and readers.get(y) == [(j, 0)] else None

    def check_mover(n: onnx.NodeProto) -> None:
        if n.domain not in STANDARD_DOMAINS or len(n.output) != 1:
            raise _NoRegionError(f"{n.op_type} {n.name!r}")
        if _read.standard_node_problem(n, model) is not None:  # left for onnxruntime to refuse
            raise _NoRegionError(f"{n.op_type} {n.name!r} fails its ONNX schema")
        if n.op_type == "Resize" and (_read.attr_string(n, "mode", "nearest") or "nearest") != "nearest":
            raise _NoRegionError("a Resize that interpolates")
        if n.op_type == "MaxPool":
            k = _read.attr_ints(n, "kernel_shape", None)
            if (
                k is None
                or len(k) != 2
                or list(_read.attr_ints(n, "strides", None) or []) != list(k)
                or any(_read.attr_ints(n, "pads", None) or [])
                or any(d != 1 for d in (_read.attr_ints(n, "dilations", None) or []))
                or _read.attr_int(n, "ceil_mode", 0)
                or (_read.attr_string(n, "auto_pad", "NOTSET") or "NOTSET") not in ("NOTSET", "VALID")
                or _read.attr_int(n, "storage_order", 0)
            ):
                raise _NoRegionError("a MaxPool other than non-overlapping windows")

    # Integer lowering leaves a MaxPool between a layer and a reader whose input quantizer A sits before the pool
    # reading the layer's float32 output itself (the reader quantizes the pooled values with A). The max of A's
    # values is A of the max, so that MaxPool may as well read the Quant(A)'s output: it does so here, and the
    # layer's only reader is then the Quant (the source form above).
    repointed: list[tuple[int, str]] = []
    for j, q in enumerate(nodes):
        if not is_quant(q) or not q.input or not q.output or q.input[0] in outputs:
            continue
        p = producer.get(q.input[0])
        if p is None or nodes[p].op_type != "QConv" or nodes[p].domain != INTEGER_DOMAIN:
            continue
        y = q.input[0]
        others = [(i, k) for i, k in readers.get(y, []) if i != j]
        if not others or readers.get(y, []).count((j, 0)) != 1:
            continue
        try:
            a = quantizer(j)
            ok = True
            for i, k in others:
                mp = nodes[i]
                check_mover(mp)
                rs = readers.get(mp.output[0], []) if mp.output else []
                ok = ok and k == 0 and mp.op_type == "MaxPool" and mp.output[0] not in outputs and bool(rs)
                ok = ok and all(
                    nodes[r].op_type in ("QConv", "QConvCodes") and nodes[r].domain == INTEGER_DOMAIN and kk == 0
                    and _canonical(_act(nodes[r])) == a
                    for r, kk in rs
                )  # fmt: skip
        except _NoRegionError:
            ok = False
        if ok:
            repointed += [(i, q.output[0]) for i, _ in others]
    if repointed:
        model = copy_model(model)
        nodes = list(model.graph.node)
        for i, v in repointed:
            old_in = nodes[i].input[0]
            readers[old_in] = [(r, k) for r, k in readers[old_in] if r != i]
            nodes[i].input[0] = v
            readers.setdefault(v, []).append((i, 0))

    def step_ok(j: int) -> None:
        """Raises _NoRegionError unless node j may be a step of a region (a per-element step or a mover)."""
        n = nodes[j]
        if is_quant(n) and len(n.input) >= 1 and len(n.output) == 1:
            return
        if n.domain in STANDARD_DOMAINS and n.op_type in _ELEMENTWISE and len(n.output) == 1:
            if _read.standard_node_problem(n, model) is not None:  # left for onnxruntime to refuse
                raise _NoRegionError(f"{n.op_type} {n.name!r} fails its ONNX schema")
            return
        if n.op_type in _MOVERS:
            return check_mover(n)
        raise _NoRegionError(f"{n.op_type} {n.name!r} reads or computes the values")

    def region(start: int) -> tuple[dict[int, int], set[int], list[tuple[int, int]], set[str]]:
        """From source Quant ``start``: ({source Quant: its QConv}, the step nodes, the readers (node, 0), values)."""
        sources: dict[int, int] = {}
        steps: set[int] = set()
        sinks: set[tuple[int, int]] = set()
        values: set[str] = set()
        todo: list[tuple[str, str]] = []  # (value, "fwd" | "back")

        def add_source(q: int) -> None:
            conv = source_of(q)
            assert conv is not None
            sources[q] = conv
            values.add(nodes[conv].output[0])
            todo.append((nodes[q].output[0], "fwd"))

        def add_step(j: int) -> None:
            if j in steps:
                return
            step_ok(j)
            steps.add(j)
            n = nodes[j]
            todo.append((n.output[0], "fwd"))
            for v in n.input if n.op_type == "Concat" else n.input[:1]:
                if v:
                    todo.append((v, "back"))

        add_source(start)
        seen: set[tuple[str, str]] = set()
        while todo:
            v, way = todo.pop()
            if (v, way) in seen:
                continue
            seen.add((v, way))
            values.add(v)
            if v in outputs:
                raise _NoRegionError(f"{v!r} is a graph output")
            if way == "back":
                p = producer.get(v)
                if p is None:
                    raise _NoRegionError(f"{v!r} is not computed by a node")
                if p in sources:
                    continue
                if is_quant(nodes[p]) and source_of(p) is not None:
                    add_source(p)
                else:
                    add_step(p)
                continue
            for j, k in readers.get(v, []):
                r = nodes[j]
                if r.op_type in ("QConv", "QConvCodes") and r.domain == INTEGER_DOMAIN:
                    if k != 0:
                        raise _NoRegionError("a layer reads the values as its residual R")
                    sinks.add((j, k))
                elif is_quant(r) and source_of(j) is not None:
                    raise _NoRegionError("a source's QConv output reached as region values")
                else:
                    add_step(j)
        return sources, steps, sorted(sinks), values

    done: set[int] = set()
    plans: list[tuple[dict[int, int], set[int], dict[int, np.ndarray | None], set[str]]] = []
    for i, n in enumerate(nodes):
        if not is_quant(n) or i in done or source_of(i) is None:
            continue
        try:
            sources, steps, sinks, values = region(i)
            done.update(sources)
            tables = _tables(nodes, sources, steps, sinks, quantizer, inits)
        except _NoRegionError:
            done.add(i)
            continue
        plans.append((sources, steps, tables, values))
    if not plans:
        return original

    out = copy_model(model)
    new_nodes = list(out.graph.node)
    drop: set[int] = set()
    stale: set[str] = set()
    alias: dict[str, str] = {}  # a dropped per-element step's output -> its input
    for sources, steps, tables, values in plans:
        for q, conv in sources.items():
            n = new_nodes[conv]
            n.op_type = "QConvCodes"
            for name, value in quantizer(q).items():
                n.attribute.append(helper.make_attribute("out_" + name, value))
            t = tables[q]
            if t is not None:
                n.attribute.append(helper.make_attribute("out_table", [int(v) for v in t]))
            alias[new_nodes[q].output[0]] = n.output[0]
            drop.add(q)
        for j in steps:
            s = new_nodes[j]
            if is_quant(s) or s.op_type in _ELEMENTWISE:
                alias[s.output[0]] = s.input[0]
                drop.add(j)
            elif s.op_type == "MaxPool":
                k = list(_read.attr_ints(s, "kernel_shape", None) or [])
                del s.attribute[:]
                s.op_type, s.domain = "MaxPoolCodes", INTEGER_DOMAIN
                s.attribute.append(helper.make_attribute("kernel_shape", k))
        stale.update(values)

    def resolve(v: str) -> str:
        while v in alias:
            v = alias[v]
        return v

    new_nodes = [m for k, m in enumerate(new_nodes) if k not in drop]
    for m in new_nodes:
        m.input[:] = [resolve(v) if v else v for v in m.input]
    live = {v for m in new_nodes for v in m.output}
    stale = {v for v in stale if v in live}
    rename_codes(new_nodes, stale, out.graph)
    set_nodes(out.graph, new_nodes, stale | set(alias))
    # The dropped Quants' parameters, now read by no node.
    read = {v for m in new_nodes for v in m.input} | {o.name for o in out.graph.output}
    dropped_params = {v for k in drop for v in model.graph.node[k].input[1:]}
    keep = [t for t in out.graph.initializer if t.name not in dropped_params or t.name in read]
    if len(keep) != len(out.graph.initializer):
        del out.graph.initializer[:]
        out.graph.initializer.extend(keep)
    return out


def _tables(
    nodes: list[onnx.NodeProto],
    sources: dict[int, int],
    steps: set[int],
    sinks: list[tuple[int, int]],
    quantizer: object,
    inits: dict[str, onnx.TensorProto],
) -> dict[int, np.ndarray | None]:
    """{source Quant: its table (None: the identity)} of a region, or _NoRegionError."""
    if not sinks:
        raise _NoRegionError("no layer reads the values")
    acts = [_canonical(_act(nodes[j])) for j, _ in sinks]
    c = acts[0]
    if any(a != c for a in acts) or c["act_scale"] is None or c["act_bipolar"] or int(c["act_bits"]) > 8:  # type: ignore[call-overload]
        raise _NoRegionError("the readers' quantizers differ or have no int8 codes")
    if any(_binary_weights(nodes[j], inits) for j, _ in sinks):
        raise _NoRegionError("a binary-weight reader")
    has_pool = any(nodes[j].op_type == "MaxPool" for j in steps)
    by_input: dict[str, list[int]] = {}
    for j in steps:
        for v in nodes[j].input[:1] if nodes[j].op_type != "Concat" else nodes[j].input:
            by_input.setdefault(v, []).append(j)
    for j, _ in sinks:
        by_input.setdefault(nodes[j].input[0], []).append(-1 - j)
    c_off, _, _ = _stored(c)
    tables: dict[int, np.ndarray | None] = {}
    for q, _conv in sources.items():
        a = quantizer(q)  # type: ignore[operator]
        if a["act_bipolar"] or int(a["act_bits"]) > 8:  # type: ignore[call-overload]
            raise _NoRegionError("a source quantizer without int8 codes")
        off, vmin, vmax = _stored(a)
        levels = np.arange(vmin, vmax + 1)
        x0 = levels.astype(np.float32) * np.float32(a["act_scale"])
        found: list[np.ndarray] = []

        def walk(v: str, x: np.ndarray, depth: int, found: list[np.ndarray] = found) -> None:
            if depth > len(nodes):
                raise _NoRegionError("a cycle")
            for j in by_input.get(v, []):
                if j < 0:  # a reader: its quantizer C, stored as C's codes
                    y = _quantize(x, c)
                    found.append(np.rint(y / np.float32(c["act_scale"])).astype(np.int64) - c_off)
                    continue
                n = nodes[j]
                if n.domain in QONNX_DOMAINS and n.op_type in _QUANTS:
                    y = _quantize(x, quantizer(j))  # type: ignore[operator]
                elif n.op_type == "LeakyRelu":
                    alpha = np.float32(_read.attr_float(n, "alpha", 0.01))
                    if has_pool and not alpha >= 0:
                        raise _NoRegionError("a decreasing LeakyRelu before a max pool")
                    y = np.where(x >= 0, x, alpha * x).astype(np.float32)
                elif n.op_type == "Relu":
                    y = np.where(x < 0, np.float32(0), x).astype(np.float32)
                else:
                    y = x
                walk(n.output[0], y, depth + 1)

        walk(nodes[q].output[0], x0, 0)
        if not found or any(not np.array_equal(f, found[0]) for f in found):
            raise _NoRegionError("the paths from a source give different tables")
        codes = found[0]
        if has_pool and np.any(np.diff(codes) < 0):
            raise _NoRegionError("a decreasing table before a max pool")
        if codes.min() < -128 or codes.max() > 127:
            raise _NoRegionError("codes outside int8")
        stored = levels - off
        if np.array_equal(codes, stored) and a == c:
            tables[q] = None
            continue
        table = np.zeros(256, dtype=np.int64)
        table[stored + 128] = codes
        tables[q] = table
    return tables


__all__ = ["flow_integer_codes"]
