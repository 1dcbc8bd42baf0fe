"""Analysis (no rewrite): which tensors of a model hold values on an integer grid, and which grid.

A tensor is on the grid ``G = (scale, zero_point, lo, hi)`` when each of its values is ``scale * (q - zero_point)``
for an integer ``q`` in ``[lo, hi]``, up to the float32 rounding of the ops that computed it (so ``q`` is recovered
exactly as ``rint(x / scale + zero_point)`` while ``|q - zero_point|`` stays far below 2^22). ``scale`` (> 0) and
``zero_point`` are float64 arrays that broadcast to the tensor by numpy's rules: 0-d when the grid is per tensor,
else e.g. ``[1, C, 1, 1]`` for a per-channel one. NaN values are on no grid; the analysis assumes there are none
(a NaN input quantizes to NaN in QONNX's Quant).

:func:`infer_grids` walks the top-level graph once in node order; each op has one small rule (a function of the
node and its inputs' grids returning the output grid or None):

- sources: ``Quant`` / ``IntQuant`` (constant scale, zero point and bit width: q in the bit width's range),
  ``QuantizeLinear`` (the integer type's range) and ``DequantizeLinear`` (its scale and zero point),
  ``BipolarQuant`` (q in {-1, 1}), ``MultiThreshold`` (the threshold count times ``out_scale`` plus ``out_bias``),
  ``Trunc`` / ``TruncQuant`` (v2: ``out_scale`` and the output bit width's range; v1: the input's grid, the code
  divided by ``2^(in - out)``), constants whose values are all integers (float or integer types: scale 1), and
  graph inputs whose ``quantization_annotation`` declares an integer ``finn_datatype`` (``INTn``, ``UINTn``,
  ``BIPOLAR``, ``BINARY``, ``TERNARY``, ``FIXED<w,i>``: :func:`declared_grid`). Such a grid is a promise of the
  model, not a fact of the graph: it carries ``declared`` (the input and its type) through every rule, and the
  layer that reads it checks its values at run time (docs/ops.md "The grid path");
- what keeps the values: Identity, DebugMarker, Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Slice, Pad
  (constant 0, or edge / reflect / wrap), Im2Col (its pad value on the grid), MaxPool, MaxPoolNHWC, Resize
  (nearest), Concat
  of grids with one scale and zero point, Relu (an integer zero point), Clip (bounds on the grid);
- what changes the scale: Mul by a constant (per tensor or per channel; a negative factor flips the codes), Div by
  a constant, Add / Sub of two grids with one scale (codes add), Add of grids whose scales are integer multiples of
  each other (the coarser codes count several steps of the finer grid: a bias added to a layer's sum),
  AveragePool / GlobalAveragePool / ReduceMean (the integer sum of the window or the reduced axes, then 1 / k),
  QuantAvgPool2d (integer input: the window sum shifted right);
- layers whose output no quantizer follows (QKeras' dense layers read by the next one): MatMul, Gemm and Conv of a
  per-tensor grid by a weight grid (per tensor or per output channel) on power-of-two scales, the exact sum on the
  scale ``s_x * s_w`` with K times the products' extremes as its range, below 2^24 (float32 computes such sums
  exactly in any order), plus a bias on a grid of a multiple of that scale.

A per-channel grid passes a shape-changing op only where the op leaves the axes it varies along alone; ranks come
from the model's declared shapes and onnx shape inference. Parameters may be float32, float64 or integer typed.
Every rule is tested against the values the ops compute (``tests/transforms/test_grid.py``).
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from ortquant.transforms import _read
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS, ModelError, value_shapes

LAYER_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
_MAX_CODE = 1 << 52  # codes beyond this are not exact in float64: no grid


@dataclass(frozen=True, eq=False)
class Grid:
    """Values ``scale * (q - zero_point)``, q an integer in ``[lo, hi]`` (module doc)."""

    scale: np.ndarray
    zero_point: np.ndarray
    lo: int
    hi: int
    # Empty when the analysis proved the grid; else the graph input whose declared type it assumes, as
    # "'<input>' (finn_datatype <TYPE>)": the values are on the grid only if the caller feeds that type.
    declared: str = ""

    @property
    def per_tensor(self) -> bool:
        return self.scale.ndim == 0 and self.zero_point.ndim == 0

    @property
    def integer_zero_point(self) -> bool:
        return bool(np.all(self.zero_point == np.rint(self.zero_point)))

    def same_scale(self, other: Grid) -> bool:
        try:
            a, b = np.broadcast_arrays(self.scale, other.scale)
        except ValueError:
            return False
        return bool(np.array_equal(a, b))

    def same_as(self, other: Grid) -> bool:
        """Same scale and zero point (the ranges may differ)."""
        try:
            a, b = np.broadcast_arrays(self.zero_point, other.zero_point)
        except ValueError:
            return False
        return self.same_scale(other) and bool(np.array_equal(a, b))

    def __str__(self) -> str:
        def show(a: np.ndarray) -> str:
            return f"{float(a):.6g}" if a.ndim == 0 else f"per-channel {list(a.shape)}"

        text = f"{show(self.scale)} * (q - {show(self.zero_point)}), q in [{self.lo}, {self.hi}]"
        return f"{text}, declared by input {self.declared}" if self.declared else text


def make_grid(scale: np.ndarray | float, zero_point: np.ndarray | float, lo: float, hi: float) -> Grid | None:
    """A grid from float parameters, or None when they do not make one (scale not finite and positive, zero point
    not finite, empty or huge range). Parameters equal everywhere are stored 0-d."""
    s = _squash(np.asarray(scale, dtype=np.float64))
    z = _squash(np.asarray(zero_point, dtype=np.float64) + 0.0)  # no -0
    if s.size == 0 or z.size == 0 or not (np.all(np.isfinite(s)) and np.all(s > 0) and np.all(np.isfinite(z))):
        return None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi or max(abs(lo), abs(hi)) > _MAX_CODE:
        return None
    if float(np.max(np.abs(z))) > _MAX_CODE:
        return None
    return Grid(s, z, int(lo), int(hi))


def _squash(a: np.ndarray) -> np.ndarray:
    """0-d when every element is equal, else ``a`` itself."""
    if a.ndim and a.size and np.all(a == a.ravel()[0]):
        return np.asarray(a.ravel()[0], dtype=np.float64)
    return a


def _full(a: np.ndarray, rank: int) -> np.ndarray | None:
    """``a`` with leading 1-axes up to ``rank`` (None when it has more axes)."""
    if a.ndim > rank:
        return None
    return a.reshape((1,) * (rank - a.ndim) + a.shape)


class Context:
    """What a rule may read: constants (initializers that are not graph inputs, Constant nodes), attributes, the
    ranks and shapes the model declares or onnx infers, and the model's opset imports."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        g = model.graph
        inputs = {i.name for i in g.input}
        self.consts: dict[str, np.ndarray] = {}
        for t in g.initializer:
            if t.name not in inputs and t.data_location != onnx.TensorProto.EXTERNAL:
                try:  # a malformed initializer is no constant here: the op reading it reports it
                    self.consts[t.name] = _read.tensor_array(t)
                except ModelError:
                    pass
        self.shapes = value_shapes(model)

    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name) if name else None

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return self.shapes.get(name)

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)


def _attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return default


def _scalar(a: np.ndarray | None) -> float | None:
    if a is None or a.size != 1:
        return None
    return float(a.ravel()[0])


Rule = Callable[[onnx.NodeProto, list["Grid | None"], Context], "Grid | None"]


# --- sources ---------------------------------------------------------------------------------------------------


def _bits_range(bits: float, signed: bool, narrow: bool) -> tuple[int, int] | None:
    """[min_int, max_int] of QONNX's Quant for an integer bit width (None otherwise)."""
    if not (np.isfinite(bits) and bits == int(bits) and 1 <= bits <= 52):
        return None
    b = int(bits)
    if signed:
        return -(1 << (b - 1)) + int(narrow), (1 << (b - 1)) - 1
    return 0, (1 << b) - 1 - int(narrow)


_FIXED = re.compile(r"FIXED<(\d+),(\d+)>")
_INT_TYPE = re.compile(r"(U?)INT(\d+)")


def declared_grid(datatype: str) -> Grid | None:
    """The grid of a qonnx ``DataType`` name (a ``finn_datatype`` annotation), None for float, scaled-integer and
    unknown types: ``INTn`` / ``UINTn`` (scale 1, the n-bit range), ``BIPOLAR`` ({-1, 1} in [-1, 1]), ``BINARY``
    ([0, 1]), ``TERNARY`` ([-1, 1]), ``FIXED<w,i>`` (signed w-bit codes of step 2^-(w - i))."""
    name = datatype.strip().upper()
    if name in ("BIPOLAR", "TERNARY"):
        return make_grid(1.0, 0.0, -1, 1)
    if name == "BINARY":
        return make_grid(1.0, 0.0, 0, 1)
    m = _INT_TYPE.fullmatch(name)
    if m is not None:
        rng = _bits_range(float(m.group(2)), not m.group(1), False)
        return None if rng is None else make_grid(1.0, 0.0, *rng)
    m = _FIXED.fullmatch(name.replace(" ", ""))
    if m is not None:
        w, i = int(m.group(1)), int(m.group(2))
        rng = _bits_range(float(w), True, False)
        if rng is None or not 0 <= i <= w:
            return None
        return make_grid(2.0 ** (i - w), 0.0, *rng)
    return None


def _declared_inputs(model: onnx.ModelProto) -> dict[str, Grid]:
    """The graph inputs (not initializers) with an integer ``finn_datatype`` annotation, and their grids."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    inputs = {i.name for i in g.input if i.name not in inits}
    out: dict[str, Grid] = {}
    for a in g.quantization_annotation:
        if a.tensor_name not in inputs:
            continue
        for kv in a.quant_parameter_tensor_names:
            if kv.key == "finn_datatype":
                grid = declared_grid(kv.value)
                if grid is not None:
                    what = f"'{a.tensor_name}' (finn_datatype {kv.value})"
                    out[a.tensor_name] = dataclasses.replace(grid, declared=what)
    return out


def rule_quant(node: onnx.NodeProto, _grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Quant / IntQuant: ``(q - zeropt) * scale``, q clamped to the bit width's range (signed 1 bit: q = +-1)."""
    if len(node.input) < 4:
        return None
    s, z, b = (ctx.const(node.input[i]) for i in (1, 2, 3))
    bits = _scalar(b)
    if s is None or z is None or bits is None:
        return None
    signed = bool(_attr(node, "signed", 1))
    rng = (-1, 1) if signed and bits == 1 else _bits_range(bits, signed, bool(_attr(node, "narrow", 0)))
    return None if rng is None else make_grid(s, z, *rng)


def rule_bipolar_quant(node: onnx.NodeProto, _grids: list[Grid | None], ctx: Context) -> Grid | None:
    """BipolarQuant: ``+-scale``, q in {-1, 1}."""
    s = ctx.const(node.input[1]) if len(node.input) > 1 else None
    return None if s is None else make_grid(s, 0.0, -1, 1)


def rule_multithreshold(node: onnx.NodeProto, _grids: list[Grid | None], ctx: Context) -> Grid | None:
    """MultiThreshold: ``out_scale * count + out_bias``, count in [0, T] (T thresholds per channel)."""
    t = ctx.const(node.input[1]) if len(node.input) > 1 else None
    if t is None or t.ndim != 2:
        return None
    os_ = float(_attr(node, "out_scale", 1.0))  # type: ignore[arg-type]
    ob = float(_attr(node, "out_bias", 0.0))  # type: ignore[arg-type]
    n = int(t.shape[1])
    if os_ > 0:
        return make_grid(os_, -ob / os_, 0, n)
    if os_ < 0:  # out_scale * count = |out_scale| * (-count)
        return make_grid(-os_, ob / os_, -n, 0)
    return None


def rule_trunc(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Trunc / TruncQuant. v2 (6 inputs): ``(q - zeropt / t) * out_scale``, q clamped to the output bit width's
    range. v1 (5 inputs, per-tensor parameters): ``(q - zeropt) * scale`` with q = round(q_in / 2^(in - out)) and
    q_in = round(x / scale + zeropt), no clamp: the range comes from the input grid's smallest and largest value."""
    if len(node.input) not in (5, 6):
        return None
    s, z = ctx.const(node.input[1]), ctx.const(node.input[2])
    if s is None or z is None:
        return None
    if len(node.input) == 6:
        out_scale, out_bits = ctx.const(node.input[4]), _scalar(ctx.const(node.input[5]))
        if out_scale is None or out_bits is None:
            return None
        with np.errstate(all="ignore"):
            ratio = np.asarray(out_scale, np.float64) / np.asarray(s, np.float64)
            t = np.exp2(np.rint(np.log2(ratio)))
        signed, narrow = bool(_attr(node, "signed", 1)), bool(_attr(node, "narrow", 0))
        rng = _bits_range(out_bits, signed, narrow)
        if rng is None or not np.all(np.isfinite(t)):
            return None
        return make_grid(out_scale, np.asarray(z, np.float64) / t, *rng)
    g, sv, zv = grids[0], _scalar(s), _scalar(z)
    in_bits, out_bits = _scalar(ctx.const(node.input[3])), _scalar(ctx.const(node.input[4]))
    if g is None or sv is None or zv is None or in_bits is None or out_bits is None or not sv > 0:
        return None
    # q_in = round(x / scale + zeropt) lies between the rounded ends of the input grid's value range
    x_lo = float(np.min(g.scale * (g.lo - g.zero_point)))
    x_hi = float(np.max(g.scale * (g.hi - g.zero_point)))
    d = 2.0 ** (in_bits - out_bits)
    q_lo, q_hi = np.floor(x_lo / sv + zv), np.ceil(x_hi / sv + zv)
    return make_grid(sv, zv, np.floor(q_lo / d), np.ceil(q_hi / d))


_INT_RANGES = {
    onnx.TensorProto.INT8: (-128, 127),
    onnx.TensorProto.UINT8: (0, 255),
    onnx.TensorProto.INT16: (-32768, 32767),
    onnx.TensorProto.UINT16: (0, 65535),
    onnx.TensorProto.INT4: (-8, 7),
    onnx.TensorProto.UINT4: (0, 15),
}


def _per_axis(a: np.ndarray, axis: int, rank: int | None) -> np.ndarray | None:
    """A QuantizeLinear / DequantizeLinear parameter as a numpy-broadcastable array: as it is when it has one
    element, else its 1-D values along ``axis`` of a tensor of rank ``rank`` (None when the rank is unknown)."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 1:
        return a.reshape(())
    if a.ndim != 1 or rank is None:
        return None
    shape = [1] * rank
    shape[axis % rank] = a.size
    return a.reshape(shape)


def rule_dequantize_linear(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """DequantizeLinear: ``(x - zero_point) * scale`` of integers x (per tensor or per axis; not blocked), x in its
    grid's range when it has one (e.g. after a Clip), else in its type's range."""
    if _attr(node, "block_size", 0):
        return None
    s = ctx.const(node.input[1]) if len(node.input) > 1 else None
    has_zp = len(node.input) > 2 and bool(node.input[2])
    z_raw = ctx.const(node.input[2]) if has_zp else np.zeros((), np.int32)  # no zero point: 0, x's type unknown
    if s is None or z_raw is None:
        return None
    g = grids[0]
    if g is not None:
        if not (g.per_tensor and float(g.scale) == 1.0 and float(g.zero_point) == 0.0):
            return None
        lo, hi = g.lo, g.hi
    else:
        x_const = ctx.const(node.input[0])
        dtype = onnx.helper.np_dtype_to_tensor_dtype(z_raw.dtype) if x_const is None and has_zp else None
        if x_const is not None:
            lo, hi = int(x_const.min()), int(x_const.max())
        elif dtype in _INT_RANGES:
            lo, hi = _INT_RANGES[dtype]
        else:
            return None
    rank, axis = ctx.rank(node.input[0]), int(_attr(node, "axis", 1))  # type: ignore[call-overload]
    scale, zp = _per_axis(s, axis, rank), _per_axis(z_raw, axis, rank)
    if scale is None or zp is None:
        return None
    return make_grid(scale, zp, lo, hi)


def rule_quantize_linear(node: onnx.NodeProto, _grids: list[Grid | None], ctx: Context) -> Grid | None:
    """QuantizeLinear: integers of the zero point's type (int8 without one), saturated to its range."""
    z = ctx.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    dtype = int(_attr(node, "output_dtype", 0)) or (  # type: ignore[call-overload]
        onnx.helper.np_dtype_to_tensor_dtype(z.dtype) if z is not None else onnx.TensorProto.UINT8
    )
    rng = _INT_RANGES.get(dtype)
    return None if rng is None else make_grid(1.0, 0.0, *rng)


def rule_clip(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Clip of a per-tensor grid by constant bounds: a bound that can act must be on the grid; the range shrinks."""
    g = grids[0]
    if g is None or not g.per_tensor:
        return None
    s, z = float(g.scale), float(g.zero_point)
    lo, hi = float(g.lo), float(g.hi)
    for index, attr, is_min in ((1, "min", True), (2, "max", False)):
        b = _scalar(ctx.const(node.input[index])) if len(node.input) > index and node.input[index] else None
        b = _attr(node, attr) if b is None else b  # opset < 11 has attributes
        if b is None:
            continue
        code = float(b) / s + z  # type: ignore[arg-type]
        if is_min and code > lo:
            if code != np.rint(code):
                return None
            lo = code
        elif not is_min and code < hi:
            if code != np.rint(code):
                return None
            hi = code
    return make_grid(s, z, lo, hi)


def rule_sub(_node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Sub of two grids with one scale: the codes subtract."""
    a, b = grids[0], grids[1] if len(grids) > 1 else None
    if a is None or b is None or not a.same_scale(b):
        return None
    try:
        zp = a.zero_point - b.zero_point
    except ValueError:
        return None
    return make_grid(a.scale, zp, a.lo - b.hi, a.hi - b.lo)


def constant_grid(value: np.ndarray) -> Grid | None:
    """A constant whose values are all integers (scale 1, zero point 0); None for other constants."""
    if value.size == 0 or value.dtype == np.bool_ or not np.issubdtype(value.dtype, np.number):
        return None
    v = value.astype(np.float64)
    if not (np.all(np.isfinite(v)) and np.all(v == np.rint(v))):
        return None
    return make_grid(1.0, 0.0, float(v.min()), float(v.max()))


# --- value-preserving ops ----------------------------------------------------------------------------------------


def rule_identity(_node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Identity, Dropout (inference): the input's grid."""
    return grids[0] if grids else None


def rule_per_tensor_only(_node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Reshape / Flatten: the input's grid when it is per tensor (the elements move to other positions)."""
    g = grids[0] if grids else None
    return g if g is not None and g.per_tensor else None


def _replace(g: Grid, scale: np.ndarray, zero_point: np.ndarray) -> Grid | None:
    return make_grid(scale, zero_point, g.lo, g.hi)


def rule_transpose(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Transpose: the grid's parameters transposed with the data."""
    g = grids[0]
    if g is None or g.per_tensor:
        return g
    perm = _attr(node, "perm")
    rank = len(perm) if perm is not None else ctx.rank(node.input[0])  # type: ignore[arg-type]
    if rank is None:
        return None
    perm = list(perm) if perm is not None else list(range(rank))[::-1]  # type: ignore[call-overload]
    s, z = _full(g.scale, rank), _full(g.zero_point, rank)
    if s is None or z is None:
        return None
    return _replace(g, np.transpose(s, perm), np.transpose(z, perm))


def _axes(node: onnx.NodeProto, ctx: Context, input_index: int) -> list[int] | None:
    """Axes from the attribute (older opsets) or the constant input; None when absent or not constant."""
    a = _attr(node, "axes")
    if a is not None:
        return [int(x) for x in a]  # type: ignore[attr-defined]
    if len(node.input) > input_index and node.input[input_index]:
        c = ctx.const(node.input[input_index])
        return None if c is None else [int(x) for x in c.ravel()]
    return None


def rule_unsqueeze(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Unsqueeze: per-tensor grids as they are; per-channel ones get the new axes."""
    g = grids[0]
    if g is None or g.per_tensor:
        return g
    axes, rank = _axes(node, ctx, 1), ctx.rank(node.input[0])
    if axes is None or rank is None:
        return None
    out_rank = rank + len(axes)
    axes = sorted(a % out_rank for a in axes)
    s, z = _full(g.scale, rank), _full(g.zero_point, rank)
    if s is None or z is None:
        return None
    return _replace(g, np.expand_dims(s, axes), np.expand_dims(z, axes))


def rule_squeeze(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Squeeze: per-tensor grids as they are; per-channel ones lose the squeezed axes (size 1 in the data)."""
    g = grids[0]
    if g is None or g.per_tensor:
        return g
    rank = ctx.rank(node.input[0])
    axes = _axes(node, ctx, 1)
    if rank is None:
        return None
    if axes is None:
        shape = ctx.shape(node.input[0])
        if shape is None or any(d is None for d in shape):
            return None
        axes = [i for i, d in enumerate(shape) if d == 1]
    s, z = _full(g.scale, rank), _full(g.zero_point, rank)
    if s is None or z is None:
        return None
    axes = tuple(sorted(a % rank for a in axes))
    if any(s.shape[a] != 1 or z.shape[a] != 1 for a in axes):
        return None
    return _replace(g, np.squeeze(s, axes), np.squeeze(z, axes))


def _varies(g: Grid, rank: int, axes: list[int]) -> bool | None:
    """Whether the grid's parameters vary along any of ``axes`` (None: they have more axes than ``rank``)."""
    s, z = _full(g.scale, rank), _full(g.zero_point, rank)
    if s is None or z is None:
        return None
    return any(s.shape[a % rank] != 1 or z.shape[a % rank] != 1 for a in axes)


def rule_slice(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Slice: a subset of the values, so the input's grid, if its parameters do not vary along the sliced axes."""
    g = grids[0]
    if g is None or g.per_tensor:
        return g
    rank = ctx.rank(node.input[0])
    if rank is None:
        return None
    axes = _axes(node, ctx, 3)
    if axes is None:
        starts = _attr(node, "starts")
        if starts is None and not (len(node.input) > 1 and ctx.const(node.input[1]) is not None):
            return None
        n = len(starts) if starts is not None else ctx.const(node.input[1]).size  # type: ignore[arg-type, union-attr]
        axes = list(range(n))
    return None if _varies(g, rank, axes) in (None, True) else g


def rule_pad(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Pad: ``constant`` with 0 adds the code ``zero_point`` (an integer); ``edge`` / ``reflect`` / ``wrap`` repeat
    values. The grid's parameters must not vary along a padded axis."""
    g = grids[0]
    if g is None:
        return None
    mode = _attr(node, "mode", "constant")
    pads = _attr(node, "pads")
    if pads is None:
        p = ctx.const(node.input[1]) if len(node.input) > 1 else None
        if p is None:
            return None
        pads = [int(x) for x in p.ravel()]
    pads = list(pads)  # type: ignore[call-overload]
    axes = _axes(node, ctx, 3)
    n = len(pads) // 2
    axes = list(range(n)) if axes is None else axes
    padded = [a for i, a in enumerate(axes) if pads[i] != 0 or pads[i + n] != 0]
    if not g.per_tensor:
        rank = ctx.rank(node.input[0])
        if rank is None or _varies(g, rank, padded) in (None, True):
            return None
    if mode != "constant":
        return g if mode in ("edge", "reflect", "wrap") else None
    value = _attr(node, "value", 0.0)
    if len(node.input) > 2 and node.input[2]:
        c = ctx.const(node.input[2])
        value = _scalar(c)
    if value is None or float(value) != 0.0:  # type: ignore[arg-type]
        return None
    if not padded:
        return g
    if not g.integer_zero_point:  # 0 = scale * (q - zero_point) needs q = zero_point, an integer
        return None
    zmin, zmax = float(np.min(g.zero_point)), float(np.max(g.zero_point))
    return make_grid(g.scale, g.zero_point, min(g.lo, zmin), max(g.hi, zmax))


def _spatial_uniform(g: Grid, ctx: Context, name: str) -> bool:
    """Whether the grid's parameters are equal along the spatial axes (2 and up) of the NC... tensor ``name``."""
    if g.per_tensor:
        return True
    rank = ctx.rank(name)
    return rank is not None and _varies(g, rank, list(range(2, rank))) is False


def rule_maxpool(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """MaxPool: each output is one of its window's values (padding never wins), so the input's grid when that is
    the same over the spatial axes."""
    g = grids[0]
    if g is None or not _spatial_uniform(g, ctx, node.input[0]):
        return None
    return g


def rule_maxpool_nhwc(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """QONNX MaxPoolNHWC: MaxPool on an N...C tensor, so the input's grid when that is the same over the spatial
    axes (1 to rank - 2)."""
    g = grids[0]
    if g is None or g.per_tensor:
        return g
    rank = ctx.rank(node.input[0])
    if rank is None or _varies(g, rank, list(range(1, rank - 1))) in (None, True):
        return None
    return g


def rule_concat(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Concat of grids with one scale and zero point that do not vary along the axis: the union of the ranges."""
    if not grids or any(g is None for g in grids):
        return None
    first = grids[0]
    assert first is not None
    if any(not first.same_as(g) for g in grids[1:]):  # type: ignore[arg-type]
        return None
    if not first.per_tensor:
        rank = ctx.rank(node.input[0])
        axis = int(_attr(node, "axis", 0))  # type: ignore[call-overload]
        if rank is None or _varies(first, rank, [axis]) in (None, True):
            return None
    ranges = [(g.lo, g.hi) for g in grids if g is not None]
    return make_grid(first.scale, first.zero_point, min(r[0] for r in ranges), max(r[1] for r in ranges))


def rule_relu(_node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Relu: ``scale * (max(q, zero_point) - zero_point)``; 0 is on the grid when the zero point is an integer."""
    g = grids[0]
    if g is None or not g.integer_zero_point:
        return None
    zmin, zmax = float(np.min(g.zero_point)), float(np.max(g.zero_point))
    return make_grid(g.scale, g.zero_point, max(g.lo, zmin), max(g.hi, zmax))


# --- scale-changing ops ------------------------------------------------------------------------------------------


def _scaled(g: Grid, c: np.ndarray) -> Grid | None:
    """The grid of ``x * c`` for a constant ``c`` (nonzero, finite): scale ``scale * |c|``; where c < 0 the codes
    change sign (zero point too), and the range becomes symmetric when the signs are mixed."""
    c = np.asarray(c, dtype=np.float64)
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c == 0):
        return None
    try:
        scale = g.scale * np.abs(c)
        sign = np.sign(c)
        zp = g.zero_point * sign
    except ValueError:
        return None
    if np.all(sign > 0):
        lo, hi = g.lo, g.hi
    elif np.all(sign < 0):
        lo, hi = -g.hi, -g.lo
    else:
        lo, hi = min(g.lo, -g.hi), max(g.hi, -g.lo)
    return make_grid(scale, zp, lo, hi)


def rule_mul(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Mul of a grid by a constant (either side), per tensor or per channel."""
    for i in (0, 1):
        c = ctx.const(node.input[1 - i])
        if grids[i] is not None and c is not None:
            return _scaled(grids[i], c)  # type: ignore[arg-type]
    return None


def rule_div(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Div of a grid by a constant: the scale divided by it."""
    c = ctx.const(node.input[1])
    if grids[0] is None or c is None:
        return None
    with np.errstate(all="ignore"):
        return _scaled(grids[0], 1.0 / np.asarray(c, dtype=np.float64))


def _sum_grid(a: Grid, b: Grid) -> Grid | None:
    """The grid of ``x + y``, x on ``a`` and y on ``b``: with one scale the codes add (zero points too); when one
    scale is an integer multiple r of the other (per tensor, or element by element after broadcasting) y's codes
    count r steps of the finer grid: ``q = qa + r * qb``, zero point ``za + r * zb``, range over every r."""
    if a.same_scale(b):
        try:
            zp = a.zero_point + b.zero_point
        except ValueError:
            return None
        return make_grid(a.scale, zp, a.lo + b.lo, a.hi + b.hi)
    try:
        sa, sb = np.broadcast_arrays(a.scale, b.scale)
    except ValueError:
        return None
    if np.all(sb >= sa):
        fine, coarse, sf, sc = a, b, sa, sb
    elif np.all(sa >= sb):
        fine, coarse, sf, sc = b, a, sb, sa
    else:
        return None
    r = sc / sf
    if not np.all(r == np.rint(r)) or float(np.max(r)) > _MAX_CODE:
        return None
    try:
        zp = fine.zero_point + r * coarse.zero_point
    except ValueError:
        return None
    ends = [float(np.min(r * coarse.lo)), float(np.max(r * coarse.hi))]
    return make_grid(sf, zp, fine.lo + ends[0], fine.hi + ends[1])


def rule_add(_node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Add of two grids whose scales are equal or integer multiples of each other (a layer's sum plus a coarser
    bias): :func:`_sum_grid`."""
    a, b = grids[0], grids[1] if len(grids) > 1 else None
    if a is None or b is None:
        return None
    return _sum_grid(a, b)


# --- layers: exact sums ------------------------------------------------------------------------------------------

_EXACT_SUM = 1 << 24  # float32 holds every integer up to this: a float32 layer's sums of such codes are exact


def is_power_of_two(a: np.ndarray | float) -> bool:
    """Whether every value of ``a`` is a power of two (a float64 mantissa of exactly 1/2)."""
    m, _e = np.frexp(np.asarray(a, dtype=np.float64))
    return bool(np.all(m == 0.5))


def _layer_sum(x: Grid, w: Grid, w_scale: np.ndarray, k: int | None) -> Grid | None:
    """The grid of a layer's unquantized sums ``sum_k x_k * w_jk`` over ``k`` products: scale ``s_x * s_w``
    (``w_scale``: the weight's scale shaped for the output), codes ``sum (qx - zx)(qw - zw)`` (zero point 0), their
    range ``k`` times the products' extremes (0 among them: a padded tap). Only on power-of-two scales and codes
    below 2^24: the float32 layer then computes each product and partial sum exactly, in any order, so its output
    is on the grid whichever backend ran it."""
    if k is None or k <= 0 or not (x.per_tensor and x.integer_zero_point and w.integer_zero_point):
        return None
    if not (is_power_of_two(x.scale) and is_power_of_two(w.scale)):
        return None
    zx = float(x.zero_point)
    xs = (min(x.lo - zx, 0.0), max(x.hi - zx, 0.0))  # 0: a convolution's padding
    ws = (w.lo - float(np.max(w.zero_point)), w.hi - float(np.min(w.zero_point)))
    ends = [p * q for p in xs for q in ws]
    lo, hi = k * min(ends), k * max(ends)
    if max(abs(lo), abs(hi)) >= _EXACT_SUM:
        return None
    return make_grid(x.scale * w_scale, 0.0, lo, hi)


def _channel_scale(w: Grid, axis: int, rank: int, out_axis: int, out_rank: int) -> np.ndarray | None:
    """The weight grid's scale as an array for the layer's output: per tensor as it is; varying only along the
    weight's ``axis`` (of ``rank``), moved to the output's ``out_axis`` (of ``out_rank``). None otherwise."""
    if w.scale.ndim == 0 and w.zero_point.ndim == 0:
        return w.scale
    full = _full(w.scale, rank)
    if full is None or _varies(w, rank, [i for i in range(rank) if i != axis]) is not False:
        return None
    shape = [1] * out_rank
    shape[out_axis] = full.shape[axis]
    return full.reshape(shape)


def _with_bias(g: Grid | None, bias: Grid | None, present: bool) -> Grid | None:
    if g is None or not present:
        return g
    return None if bias is None else _sum_grid(g, bias)


def rule_matmul(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """MatMul of a per-tensor grid by a 2-D weight on a grid (per tensor or per output column): the exact sum
    (:func:`_layer_sum`), K from the declared or inferred shapes."""
    x, w = grids[0], grids[1] if len(grids) > 1 else None
    wshape = ctx.shape(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or wshape is None or len(wshape) != 2:
        return None
    ws = _channel_scale(w, 1, 2, 0, 1)  # [N]: broadcasts along the output's last axis
    return None if ws is None else _layer_sum(x, w, ws, wshape[0])


def rule_gemm(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Gemm (alpha = beta = 1, A not transposed) of a per-tensor grid by a weight on a grid (per tensor or per
    output column), plus C on a grid whose scale is a multiple of the sum's."""
    if _attr(node, "alpha", 1.0) != 1.0 or _attr(node, "beta", 1.0) != 1.0 or _attr(node, "transA", 0):
        return None
    x, w = grids[0], grids[1] if len(grids) > 1 else None
    wshape = ctx.shape(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or wshape is None or len(wshape) != 2:
        return None
    trans = bool(_attr(node, "transB", 0))
    ws = _channel_scale(w, 0 if trans else 1, 2, 0, 1)
    if ws is None:
        return None
    g = _layer_sum(x, w, ws, wshape[1] if trans else wshape[0])
    return _with_bias(g, grids[2] if len(grids) > 2 else None, len(node.input) > 2 and bool(node.input[2]))


def rule_conv(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Conv (any padding: a padded tap adds the product 0) of a per-tensor grid by a weight on a grid
    (per tensor or per output channel), plus a bias on a grid whose scale is a multiple of the sum's: K = C / group
    * the kernel's size."""
    x, w = grids[0], grids[1] if len(grids) > 1 else None
    wshape = ctx.shape(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or wshape is None or len(wshape) < 3 or any(d is None for d in wshape):
        return None
    rank = len(wshape)
    ws = _channel_scale(w, 0, rank, 0, rank - 1)  # [M, 1, ...]: the output's channel axis
    if ws is None:
        return None
    k = int(np.prod([d for d in wshape[1:]]))  # type: ignore[misc]
    g = _layer_sum(x, w, ws, k)
    return _with_bias(g, grids[2] if len(grids) > 2 else None, len(node.input) > 2 and bool(node.input[2]))


def _pooled(g: Grid, k: int, padded: bool) -> Grid | None:
    """The average of k grid values (``padded``: some may be the padding 0, i.e. the code zero_point)."""
    lo, hi = g.lo, g.hi
    if padded:
        if not g.integer_zero_point:
            return None
        lo, hi = min(lo, int(np.min(g.zero_point))), max(hi, int(np.max(g.zero_point)))
    return make_grid(g.scale / k, g.zero_point * k, k * lo, k * hi)


def rule_averagepool(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """AveragePool: the integer sum of the window's codes, then the scale divided by the window size; windows
    divided by another count (pads without ``count_include_pad``, ``ceil_mode``, ``auto_pad`` SAME) are not."""
    g = grids[0]
    if g is None or not _spatial_uniform(g, ctx, node.input[0]):
        return None
    kernel = [int(k) for k in _attr(node, "kernel_shape", [])]  # type: ignore[attr-defined]
    pads = [int(p) for p in _attr(node, "pads", [])]  # type: ignore[attr-defined]
    if not kernel or _attr(node, "auto_pad", "NOTSET") not in ("NOTSET", "VALID") or _attr(node, "ceil_mode", 0):
        return None
    padded = any(pads)
    if padded and not _attr(node, "count_include_pad", 0):
        return None
    return _pooled(g, int(np.prod(kernel)), padded)


def rule_global_averagepool(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """GlobalAveragePool: AveragePool over the whole (static) spatial extent."""
    g = grids[0]
    shape = ctx.shape(node.input[0])
    if g is None or shape is None or len(shape) < 3 or any(d is None for d in shape[2:]):
        return None
    if not _spatial_uniform(g, ctx, node.input[0]):
        return None
    return _pooled(g, int(np.prod(shape[2:])), False)  # type: ignore[arg-type]


def rule_reducemean(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """ReduceMean (torch's dynamo exporter writes a global average pool so): the integer sum of the reduced values,
    then 1 / their count, over axes of static size along which the grid does not vary; a per-channel grid only with
    ``keepdims`` (its parameters keep their axes). No axes: every axis, or the input as it is with
    ``noop_with_empty_axes``."""
    g = grids[0]
    shape = ctx.shape(node.input[0])
    if g is None or shape is None:
        return None
    rank = len(shape)
    axes = _axes(node, ctx, 1)
    if axes is None and len(node.input) > 1 and node.input[1]:
        return None  # axes computed at run time
    if not axes:
        if _attr(node, "noop_with_empty_axes", 0):
            return g
        axes = list(range(rank))
    if any(not -rank <= a < rank for a in axes):
        return None
    dims = sorted({a % rank for a in axes})
    if any(shape[a] is None for a in dims):
        return None
    if not g.per_tensor and (not _attr(node, "keepdims", 1) or _varies(g, rank, dims) is not False):
        return None
    return _pooled(g, int(np.prod([shape[a] for a in dims])), False)  # type: ignore[misc]


def rule_quant_avgpool2d(node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """QuantAvgPool2d on integer values (scale 1, integer zero point): ``(window sum) >> shift`` (scale 1)."""
    g = grids[0]
    if g is None or not g.per_tensor or float(g.scale) != 1.0 or not g.integer_zero_point:
        return None
    k = int(_attr(node, "kernel", 0))  # type: ignore[call-overload]
    ibits, obits = int(_attr(node, "ibits", 0)), int(_attr(node, "obits", 0))  # type: ignore[call-overload]
    if k < 1 or not (1 <= ibits <= 64 and 1 <= obits <= 64):
        return None
    shift = max(0, int((2**ibits - 1) * k * k).bit_length() - obits)
    z = float(g.zero_point)
    lo, hi = (g.lo - z) * k * k, (g.hi - z) * k * k
    return make_grid(1.0, 0.0, np.floor(lo / 2**shift), np.floor(hi / 2**shift))


def rule_resize(node: onnx.NodeProto, grids: list[Grid | None], ctx: Context) -> Grid | None:
    """Resize with ``mode`` nearest: each output is one of the input's values (grid equal over the spatial axes)."""
    g = grids[0]
    if g is None or _attr(node, "mode", "nearest") != "nearest" or not _spatial_uniform(g, ctx, node.input[0]):
        return None
    return g


def rule_im2col(node: onnx.NodeProto, grids: list[Grid | None], _ctx: Context) -> Grid | None:
    """Im2Col (per-tensor grids): the input's values and ``pad_value`` where it pads, which must be on the grid."""
    g = grids[0]
    if g is None or not g.per_tensor:
        return None
    if not any(int(p) for p in _attr(node, "pad_amount", [])):  # type: ignore[attr-defined]
        return g
    code = int(_attr(node, "pad_value", 0)) / float(g.scale) + float(g.zero_point)  # type: ignore[call-overload]
    if code != np.rint(code):
        return None
    return make_grid(g.scale, g.zero_point, min(g.lo, code), max(g.hi, code))


STANDARD_RULES: dict[str, Rule] = {
    "Resize": rule_resize,
    "Identity": rule_identity,
    "Dropout": rule_identity,
    "Transpose": rule_transpose,
    "Reshape": rule_per_tensor_only,
    "Flatten": rule_per_tensor_only,
    "Squeeze": rule_squeeze,
    "Unsqueeze": rule_unsqueeze,
    "Slice": rule_slice,
    "Pad": rule_pad,
    "MaxPool": rule_maxpool,
    "Concat": rule_concat,
    "Relu": rule_relu,
    "Mul": rule_mul,
    "Div": rule_div,
    "Add": rule_add,
    "Sub": rule_sub,
    "MatMul": rule_matmul,
    "Gemm": rule_gemm,
    "Conv": rule_conv,
    "Clip": rule_clip,
    "QuantizeLinear": rule_quantize_linear,
    "DequantizeLinear": rule_dequantize_linear,
    "AveragePool": rule_averagepool,
    "GlobalAveragePool": rule_global_averagepool,
    "ReduceMean": rule_reducemean,
}

QONNX_RULES: dict[str, Rule] = {
    "Quant": rule_quant,
    "IntQuant": rule_quant,
    "BipolarQuant": rule_bipolar_quant,
    "MultiThreshold": rule_multithreshold,
    "Trunc": rule_trunc,
    "TruncQuant": rule_trunc,
    "QuantAvgPool2d": rule_quant_avgpool2d,
    "Im2Col": rule_im2col,
    "MaxPoolNHWC": rule_maxpool_nhwc,
    "DebugMarker": rule_identity,
}


# Sources whose output grid holds whatever their input is (the quantizers): a declared input's mark stops there.
_PROVEN = (rule_quant, rule_bipolar_quant, rule_multithreshold, rule_quantize_linear)


def _rule(node: onnx.NodeProto) -> Rule | None:
    if node.domain in STANDARD_DOMAINS:
        return STANDARD_RULES.get(node.op_type)
    if node.domain in QONNX_DOMAINS:
        return QONNX_RULES.get(node.op_type)
    return None


def _topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes in an order where producers come first (published graphs are not always sorted), otherwise in
    their order in the file; nodes on a cycle or after one keep their order at the end. Linear in the graph's size
    (Kahn's algorithm, the ready node first in file order)."""
    nodes = list(graph.node)
    given = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    producers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for o in n.output:
            if o:
                producers.setdefault(o, []).append(k)
    waiting = [0] * len(nodes)  # per node: how many of its inputs' producers have not been placed yet
    readers: dict[int, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            if i and i not in given:
                for p in producers.get(i, ()):
                    waiting[k] += 1
                    readers.setdefault(p, []).append(k)
    heap = [k for k in range(len(nodes)) if waiting[k] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        k = heapq.heappop(heap)
        order.append(k)
        for r in readers.get(k, ()):
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(heap, r)
    placed = set(order)
    return [nodes[k] for k in order] + [n for k, n in enumerate(nodes) if k not in placed]


def infer_grids(model: onnx.ModelProto) -> dict[str, Grid]:
    """The grid of every value of the top-level graph that is on one (module doc); values not in the result are on
    no grid the rules know. Initializers that are also graph inputs are not constants (they can be fed)."""
    ctx = Context(model)
    grids: dict[str, Grid] = dict(_declared_inputs(model))
    for name, value in ctx.consts.items():
        g = constant_grid(value)
        if g is not None:
            grids[name] = g
    for node in _topological(model.graph):
        if node.domain in STANDARD_DOMAINS and node.op_type == "Constant":
            t = _attr(node, "value")
            if isinstance(t, onnx.TensorProto) and node.output and node.output[0]:
                try:
                    value = _read.tensor_array(t, node, "the value of")
                except ModelError:
                    continue
                ctx.consts[node.output[0]] = value
                g = constant_grid(value)
                if g is not None:
                    grids[node.output[0]] = g
            continue
        rule = _rule(node)
        if rule is None or not node.output or not node.output[0]:
            continue
        if node.domain in STANDARD_DOMAINS and _read.standard_node_problem(node, model) is not None:
            continue  # a node onnxruntime refuses as written (attribute types, counts): no grid; it judges the node
        ins = [grids.get(i) if i else None for i in node.input]
        try:
            g = rule(node, ins, ctx)
        except (ValueError, TypeError, IndexError, ArithmeticError):  # malformed parameters (inf sizes, ...): no
            g = None  # grid (the op's checks report them)
        if g is not None:
            declared = next((i.declared for i in ins if i is not None and i.declared), "")
            if declared and not g.declared and rule not in _PROVEN:  # computed from a declared input: still a promise
                g = dataclasses.replace(g, declared=declared)
            grids[node.output[0]] = g
    return grids


@dataclass(frozen=True)
class LayerGrids:
    """A Conv / ConvTranspose / MatMul / Gemm node and the grids of its two operands (None: not on a grid)."""

    name: str
    op_type: str
    inputs: tuple[Grid | None, Grid | None]

    @property
    def on_grids(self) -> bool:
        return all(g is not None for g in self.inputs)


def layer_grids(model: onnx.ModelProto, grids: dict[str, Grid] | None = None) -> list[LayerGrids]:
    """Per Conv / ConvTranspose / MatMul / Gemm node of the top-level graph: the grids of its data and weight."""
    grids = infer_grids(model) if grids is None else grids
    out = []
    for n in model.graph.node:
        if n.domain in STANDARD_DOMAINS and n.op_type in LAYER_OPS and len(n.input) >= 2:
            out.append(LayerGrids(n.name or n.output[0], n.op_type, (grids.get(n.input[0]), grids.get(n.input[1]))))
    return out


__all__ = ["Grid", "LayerGrids", "declared_grid", "infer_grids", "is_power_of_two", "layer_grids", "make_grid"]
