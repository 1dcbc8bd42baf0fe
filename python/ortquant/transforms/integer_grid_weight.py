"""Integer-mode rule: a layer's weight computed from constants only, on an integer grid (``transforms/grid.py``).

The fast path of ``lower_integer`` takes a weight that is the output of a Quant / BipolarQuant on a constant. Other
constant weights are common in published models: a quantizer followed by a Transpose (Brevitas / FINN exports of
``x @ W.T``), an Unsqueeze or a Reshape; FINN-streamlined graphs whose weights are integer-valued float constants;
a DequantizeLinear on a constant. For those, :func:`constant_value` evaluates the constant subgraph once (the
quantizers with ortquant's own ops, as ``fold_weight_quantizers`` does; data movement in numpy; anything else in one
onnxruntime session) and :func:`grid_weight_codes` takes the codes from the weight's grid (``infer_grids``):

    codes = rint(w / scale)      scale varying only along the output-channel axis, integer zero point

accepted only when they reproduce the weight exactly: ``float32(codes * float32(scale)) == w`` for every value (the
per-channel weight scale is then ``float32(scale)``, what a float32 quantizer computed with), or else
``float32(codes * scale) == w`` with the grid's float64 scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read
from ortquant.transforms._integer_common import NoGridError, SkipError
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS
from ortquant.transforms.grid import Grid, make_grid

_MAX_NODES = 64  # a weight's constant subgraph larger than this stays on the float path
_MAX_CODE = 1 << 15  # codes are stored as int16 before the backend takes them (int8 engine / float-exact)
_QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant", "Trunc", "TruncQuant", "FloatQuant")
_MOVES = ("Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze")

Evaluate = Callable[[onnx.ModelProto, list[onnx.NodeProto]], list[onnx.TensorProto]]


def constant_subgraph(
    value: str, producer: dict[str, onnx.NodeProto], constants: set[str]
) -> list[onnx.NodeProto] | None:
    """The nodes that compute ``value`` from the constant initializers ``constants`` only, producers first; ``[]``
    when ``value`` is itself a constant, None when it depends on anything else (a graph input, a subgraph, ...)."""
    if value in constants:
        return []
    order: list[onnx.NodeProto] = []
    seen: set[str] = set()

    def visit(v: str) -> bool:
        if v in constants or v in seen:
            return True
        node = producer.get(v)
        if node is None or len(order) >= _MAX_NODES:
            return False
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return False
        if not all(not i or visit(i) for i in node.input):
            return False
        seen.update(node.output)
        order.append(node)
        return True

    return order if visit(value) else None


def _move(node: onnx.NodeProto, args: list[np.ndarray | None]) -> np.ndarray | None:
    """A data-movement node on numpy arrays (None when its form is not handled here)."""
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    x = args[0]
    if x is None:
        return None
    if node.op_type == "Identity":
        return x
    # Axes outside what the ONNX op allows are not handled here (the session that evaluates what is left refuses
    # them, naming the node), so a value numpy would wrap never becomes a weight.
    if node.op_type == "Transpose":
        perm = a.get("perm")
        if perm is not None and sorted(int(p) for p in perm) != list(range(x.ndim)):  # type: ignore[attr-defined]
            return None
        return np.transpose(x, None if perm is None else list(perm))  # type: ignore[call-overload]
    if node.op_type == "Flatten":
        axis = int(a.get("axis", 1))  # type: ignore[call-overload]
        if not -x.ndim <= axis <= x.ndim:
            return None
        axis = axis + x.ndim if axis < 0 else axis
        return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
    if node.op_type == "Reshape":
        shape = args[1] if len(args) > 1 else None
        if shape is None or a.get("allowzero", 0):
            return None
        dims = [x.shape[i] if int(d) == 0 else int(d) for i, d in enumerate(shape.ravel())]
        return x.reshape(dims)
    axes_v = a.get("axes")
    if axes_v is None and len(args) > 1 and args[1] is not None:
        axes_v = [int(d) for d in args[1].ravel()]
    if node.op_type == "Squeeze":
        if axes_v is None:
            return np.squeeze(x)
        if any(not -x.ndim <= int(d) < x.ndim for d in axes_v):  # type: ignore[attr-defined]
            return None
        return np.squeeze(x, tuple(int(d) % x.ndim for d in axes_v))  # type: ignore[attr-defined]
    if node.op_type == "Unsqueeze" and axes_v is not None:
        rank = x.ndim + len(axes_v)  # type: ignore[arg-type]
        if any(not -rank <= int(d) < rank for d in axes_v):  # type: ignore[attr-defined]
            return None
        return np.expand_dims(x, tuple(sorted(int(d) % rank for d in axes_v)))  # type: ignore[attr-defined]
    return None


def constant_value(
    model: onnx.ModelProto,
    value: str,
    nodes: list[onnx.NodeProto],
    read: Callable[[str], np.ndarray],
    evaluate: Evaluate,
) -> np.ndarray:
    """The value of ``value``, computed by ``nodes`` (:func:`constant_subgraph`) from constant initializers (``read``
    gives their values). QONNX quantizers on constants go through ``evaluate`` (ortquant's ops, bit for bit what the
    node computes), data movement through numpy, and what is left through one onnxruntime session."""
    if not nodes:
        return read(value)
    for n in nodes:  # the lowering drops these nodes: one onnxruntime would refuse must stay, for it to refuse
        problem = _read.standard_node_problem(n, model) if n.domain in STANDARD_DOMAINS else None
        if problem is not None:
            raise SkipError(f"the weight's constant subgraph has a node onnxruntime refuses: {problem}")
    known: dict[str, np.ndarray] = {}

    def arg(name: str) -> np.ndarray | None:
        if not name:
            return None
        if name not in known:
            known[name] = read(name)
        return known[name]

    produced = {o for n in nodes for o in n.output}
    quantizers = [
        n
        for n in nodes
        if n.domain in QONNX_DOMAINS and n.op_type in _QUANTIZERS and not any(i in produced for i in n.input)
    ]
    if quantizers:
        try:
            tensors = evaluate(model, quantizers)
        except Exception as e:  # the float path runs the node and reports its error
            raise SkipError(f"the weight's quantizer cannot be evaluated: {str(e).splitlines()[0][:300]}") from e
        for n, t in zip(quantizers, tensors, strict=True):
            known[n.output[0]] = numpy_helper.to_array(t)
    rest = [n for n in nodes if n.output[0] not in known]
    while rest and rest[0].domain in STANDARD_DOMAINS and rest[0].op_type in _MOVES and len(rest[0].output) == 1:
        n = rest[0]
        try:
            y = _move(n, [arg(i) for i in n.input])
        except (ValueError, TypeError, IndexError):
            y = None
        if y is None:
            break
        known[n.output[0]] = y
        rest = rest[1:]
    if rest:
        y = _run(model, rest, {k: v for k, v in known.items() if any(k in n.input for n in rest)}, arg)
        known.update(y)
    if value not in known:
        raise SkipError("the weight's constant subgraph does not compute it")
    return known[value]


def _run(
    model: onnx.ModelProto,
    nodes: list[onnx.NodeProto],
    known: dict[str, np.ndarray],
    arg: Callable[[str], np.ndarray | None],
) -> dict[str, np.ndarray]:
    """``nodes`` in one onnxruntime session with ortquant's ops, on the values ``known`` and constant initializers."""
    import onnxruntime as ort

    from ortquant._library import register

    produced = {o for n in nodes for o in n.output}
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    inits = []
    for name in sorted(needed):
        v = known[name] if name in known else arg(name)
        if v is None:
            raise SkipError(f"the weight's constant subgraph reads '{name}', which is not a constant")
        inits.append(numpy_helper.from_array(np.asarray(v), name))
    outs = [helper.make_empty_tensor_value_info(o) for n in nodes for o in n.output if o]
    graph = helper.make_graph(list(nodes), "constant_weight", [], outs, initializer=inits)
    sub = helper.make_model(graph, opset_imports=list(model.opset_import))
    sub.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    register(so)
    try:
        sess = ort.InferenceSession(sub.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
        names = [o.name for o in outs]
        return dict(zip(names, sess.run(names, {}), strict=True))
    except Exception as e:  # the float path runs the nodes and reports their error
        raise SkipError(f"the weight's constant subgraph cannot be evaluated: {str(e).splitlines()[0][:300]}") from e


def inferred_weight_grid(w: np.ndarray, axis: int, max_code: int = 127) -> Grid | None:
    """A grid with one scale per output channel (along ``axis``, zero point 0) on which the float32 constant
    weight ``w`` lies, inferred from its values: a weight a quantizer wrote out already (qonnx's cleanup with its
    quantizers folded, ``FoldConstants`` on a whole model), whose values are ``float32(q * s)`` per channel with no
    scale left in the graph. Per channel, with m its smallest nonzero magnitude, each ratio ``|w| / m`` is taken as
    the nearest fraction of denominator at most ``max_code``; the least common multiple k of those denominators is
    the smallest code of magnitude m, and the scale s is ``float32(m / k)`` or one of its three nearest float32
    neighbours on either side (m itself was rounded), the first whose codes ``rint(w / s)`` stay within
    ``max_code`` and give back every value exactly (a channel of zeros takes scale 1). None when some channel has
    no such scale (a weight that is not quantized)."""
    if w.dtype != np.float32 or w.size == 0 or not -w.ndim <= axis < w.ndim or not np.all(np.isfinite(w)):
        return None
    ch = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1).astype(np.float64)
    scales = np.ones(ch.shape[0])
    lo, hi = 0, 0
    for c in range(ch.shape[0]):
        mags = np.unique(np.abs(ch[c]))
        mags = mags[mags > 0]
        if mags.size == 0:
            continue  # every value 0
        if mags.size > max_code:
            return None  # more magnitudes than codes
        k = 1
        for r in mags / mags[0]:
            k = math.lcm(k, Fraction(float(r)).limit_denominator(max_code).denominator)
            if k > max_code:
                return None
        # m = float32(k * s) is rounded: s is float32(m / k) or one of its float32 neighbours
        up = down = near = np.float32(mags[0] / k)
        candidates = [near]
        for _ in range(3):
            up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(0))
            candidates += [up, down]
        for sc32 in candidates:
            q = np.rint(ch[c] / np.float64(sc32))
            if np.max(np.abs(q)) <= max_code and np.array_equal(
                (q.astype(np.float32) * sc32).astype(np.float64), ch[c]
            ):
                break
        else:
            return None
        scales[c] = np.float64(sc32)
        lo, hi = min(lo, int(q.min())), max(hi, int(q.max()))
    shape = [1] * w.ndim
    shape[axis] = w.shape[axis]
    return make_grid(scales.reshape(shape), 0.0, lo, hi)


def grid_weight_codes(w: np.ndarray, grid: Grid | None, axis: int, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer codes (int64, the weight's shape) of the constant weight ``w`` on ``grid`` and its float64 scale per
    output channel (along ``axis``); SkipError with the reason when they do not reproduce ``w`` exactly."""
    if grid is None:
        raise NoGridError("the weight's values are on no integer grid")
    if w.dtype != np.float32:
        raise SkipError(f"the weight is {w.dtype}, integer mode takes float32")
    if w.ndim != ndim:
        raise SkipError(f"the weight has {w.ndim} dimensions, the layer takes {ndim}")
    if w.size == 0:
        raise SkipError(f"the weight of shape {list(w.shape)} has no element")
    try:
        sb = np.broadcast_to(grid.scale, w.shape).astype(np.float64)
        zb = np.broadcast_to(grid.zero_point, w.shape)
    except ValueError as e:
        raise SkipError(f"the weight's grid {grid} does not broadcast to the weight {list(w.shape)}") from e
    if not grid.integer_zero_point:
        raise SkipError(f"the weight's grid {grid} has a non-integer zero point")
    s_ch = np.moveaxis(sb, axis, 0).reshape(sb.shape[axis], -1)
    if not np.all(s_ch == s_ch[:, :1]):
        raise SkipError("the weight's grid scale varies along another axis than the output channel")
    s_ch = s_ch[:, 0]
    with np.errstate(all="ignore"):
        codes = np.rint(w.astype(np.float64) / sb)
    if not np.all(np.abs(codes) <= _MAX_CODE):
        raise SkipError(f"the weight's codes exceed {_MAX_CODE} in magnitude")
    del zb  # codes are q - z: the zero point only has to be an integer (checked above)
    s32 = sb.astype(np.float32)
    if np.array_equal(codes.astype(np.float32) * s32, w):  # equal values (a -0.0 weight is code 0)
        return codes.astype(np.int64), s_ch.astype(np.float32).astype(np.float64)
    if np.array_equal((codes * sb).astype(np.float32), w):
        return codes.astype(np.int64), s_ch
    raise SkipError(f"the weight's values are not exactly code * scale on its grid {grid}")
