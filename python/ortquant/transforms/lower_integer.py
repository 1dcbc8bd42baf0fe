"""Rewrite (integer mode): QONNX quantized layers become one ``ortquant.integer`` op each, run on the int8 engine.

The fast path: a layer is
``Quant(activation) -> [Reshape | Flatten | MaxPool]* -> Conv / MatMul / Gemm <- Quant(constant weight)``
(``BipolarQuant`` on either side too), optionally followed by a ``BatchNormalization`` that only it feeds. It
becomes ``QConv`` / ``QGemm`` whose inputs are the activation quantizer's *float input* (the op quantizes it
itself, exactly as Quant does), the weight codes (int8, computed here once), and float64 per-output-channel
scale ``S`` and bias ``B``::

    S[j] = float64(s_act) * float64(s_w[j])                     exact (two float32 values)
    B[j] = float64(bias[j])  (Gemm: float64(beta) * bias)      0 without a bias
    with a BatchNormalization folded: g = float64(gamma) / sqrt(float64(var) + float64(eps))
        S[j] <- S[j] * g[j];  B[j] <- (B[j] - float64(mean[j])) * g[j] + float64(beta[j])

Two backends compute the same bits (the contract only depends on the exact integer sum):

- ``engine``: ``QConv`` / ``QGemm`` on ortquant's int8 GEMM engine (VNNI where the CPU has it; on AVX2 an
  int16-accumulating kernel for activations of at most 7 bits, an exact sign kernel otherwise);
- ``float``: ``QuantCodes`` (the activation's integer values q - z as float32) -> onnxruntime's own float ``Conv`` /
  ``MatMul`` on the weight codes as float32 -> ``Rescale``. Used only where every partial sum is an integer below
  2^24 (``K * max|a| * max|w| < 2^24``), so float32 sums them exactly in any order. A 2-D ``ConvTranspose`` takes
  this backend only (onnxruntime's ``ConvTranspose`` with the node's own attributes on the codes), where exact, and
  so does a ``MatMul`` of two quantized activations (attention: :func:`_lower_activation_matmul`).

``ORTQUANT_INTEGER_BACKEND=engine|float|mixed|auto`` chooses (default ``auto`` = ``mixed``: per layer, ``engine``
where the weight codes fit int8, ``float`` for the others where exact; ``engine`` and ``float`` force one backend,
leaving on the float path what it cannot run). The choice is made when the model is
prepared, so a model prepared by ``ortquant prepare --integer`` carries the preparing machine's choice; the
results are the same bits either way.

Where that local pattern does not match, the grid path (``transforms/grid.py``'s ``infer_grids``) takes over:

- an activation with no quantizer right before the layer (a Transpose, a Mul by a scale, a MultiThreshold, a
  Trunc, a residual Add ...), or one whose quantizer has float64 / int64 parameters that could change its codes
  (not a power-of-two float64 scale or a zero point 0 of another type: :func:`_same_as_float32`), but on a
  per-tensor integer grid: the op reads the activation itself and recovers its codes with a quantizer synthesized
  from the grid, and ``S`` uses the grid's float64 scale (``integer_grid_activation.py``);
- a weight computed from constants only (a quantizer then a Transpose, an integer-valued constant, a
  DequantizeLinear on a constant ...): its constant subgraph is evaluated once and its codes taken from its grid,
  checked to reproduce it exactly (``integer_grid_weight.py``; a bias computed from constants is evaluated too);
- a 1-D convolution runs as the 2-D QConv with height 1 between an Unsqueeze and a Squeeze (``integer_conv1d.py``).

Anything else stays on the float path: :func:`integer_plan` says per layer which path it takes and why, and on the
grid path which grid (``ortquant check --integer`` prints it). The quantizer nodes stay in the graph while anything
else reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.transforms import _read, integer_conv1d
from ortquant.transforms._integer_common import NoGridError, NoQuantizerError, TypeSkipError
from ortquant.transforms._integer_common import SkipError as _SkipError
from ortquant.transforms._util import (
    QONNX_DOMAINS,
    STANDARD_DOMAINS,
    ModelError,
    all_nodes,
    copy_model,
    infer_shapes,
)
from ortquant.transforms.drop_unused_initializers import keep_read_initializers
from ortquant.transforms.grid import Grid, infer_grids
from ortquant.transforms.integer_grid_activation import MAX_ACT_BITS, grid_activation, wide_span_problem
from ortquant.transforms.integer_grid_weight import (
    constant_subgraph,
    constant_value,
    grid_weight_codes,
    inferred_weight_grid,
)

DOMAIN = "ortquant.integer"
LAYER_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
_QUANT = ("Quant", "IntQuant")
# Per-tensor quantization commutes with these: Reshape/Flatten move elements, and MaxPool takes a maximum, which a
# monotone non-decreasing quantizer preserves (max(Q(x)) = Q(max(x)); MaxPool pads with -inf, never selected).
_PASS_THROUGH = ("Reshape", "Flatten", "MaxPool")
_ROUNDING_MODES = ("ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "ROUND_TO_ZERO", "HALF_UP", "HALF_DOWN")
# Element types the float Quant takes for its bit width (docs/ops.md) that integer mode reads (an integral value: its
# type changes nothing but the bounds' arithmetic, exact for every bit width integer mode takes).
_BITS_DTYPES = (np.float32, np.float64, np.int32, np.int64)
# QConv's geometry limits (core/checked.h kMaxConvStride, kMaxGeometry): layers beyond them stay on the float path.
_MAX_CONV_STRIDE = 64
_MAX_GEOMETRY = 1 << 16
MAX_K = 131071  # the engine's longest exact reduction (core/gemm/pack.h kMaxK)
FLOAT_EXACT_LIMIT = 1 << 24  # integers up to this magnitude are exact in float32


def integer_backend() -> str:
    """The backend ``lower_integer`` uses now: ``engine``, ``float`` or ``mixed`` (per layer; see the module doc)."""
    import os

    choice = os.environ.get("ORTQUANT_INTEGER_BACKEND", "auto").strip().lower() or "auto"
    if choice in ("engine", "float", "mixed"):
        return choice
    if choice != "auto":
        raise ValueError(f"ORTQUANT_INTEGER_BACKEND must be engine, float, mixed or auto, got {choice!r}")
    return "mixed"


def _weight_shift(w_codes: np.ndarray, act: dict[str, object], op: str) -> np.ndarray | None:
    """Per output channel, the shift ``d`` that puts a layer's weight codes wider than int8 into int8 (``w - d`` in
    [-128, 127]; QConv's and QGemm's ``w_shift``), or None when the layer cannot take one: a ConvTranspose, an
    activation of more than 8 bits, a channel spanning more than 256 codes, or sums that could leave int32
    (128 * sum |w| >= 2^31). Asymmetric 8-bit weights (uint8 codes with a zero point per channel: q - z in
    [-255, 255]) have one."""
    if op == "ConvTranspose" or int(act.get("act_bits", 8)) > 8 or w_codes.size == 0:  # type: ignore[call-overload]
        return None
    rows = w_codes.reshape(w_codes.shape[0], -1).astype(np.int64)
    lo, hi = rows.min(axis=1), rows.max(axis=1)
    shift = hi - 127
    if np.any(hi - lo > 255) or np.any(np.abs(shift) > 1 << 16):
        return None
    if np.any(np.abs(rows).sum(axis=1) * 128 >= 1 << 31):
        return None
    return shift


def _act_max(act: dict[str, object]) -> int:
    """The largest |q - z| the activation quantizer can produce."""
    if act.get("act_bipolar") or (act.get("act_signed", 1) and act.get("act_bits") == 1):
        return 1
    bits, signed, narrow = int(act["act_bits"]), int(act.get("act_signed", 1)), int(act.get("act_narrow", 0))
    z = int(float(act.get("act_zeropt", 0.0)))
    lo, hi = (-(2 ** (bits - 1)) + narrow, 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1 - narrow)
    return max(abs(lo - z), abs(hi - z))


@dataclass
class LayerDecision:
    """How integer mode runs one Conv / MatMul / Gemm node."""

    node: str
    op_type: str
    integer: bool
    reason: str


@dataclass
class _Lowered:
    node: onnx.NodeProto
    new_nodes: list[onnx.NodeProto]
    initializers: list[onnx.TensorProto]
    removed: list[onnx.NodeProto] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)  # replayed node name -> its original's name
    core: onnx.NodeProto | None = None  # the QConv / QGemm, or the float Conv / MatMul on codes (float-exact)
    notes: list[str] = field(default_factory=list)  # what the plan says besides the path (grids used)
    constant_nodes: list[onnx.NodeProto] = field(default_factory=list)  # the weight's constant subgraph


class _Graph:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        g = model.graph
        inputs = {i.name for i in g.input}
        self.init = {t.name: t for t in g.initializer if t.name not in inputs}
        self.producer = {o: n for n in g.node for o in n.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in g.output}
        self._const_cache: dict[str, np.ndarray] = {}
        self._shapes: dict[str, tuple[int, tuple[int | None, ...] | None]] | None = None
        self._grids: dict[str, Grid] | None = None

    @property
    def grids(self) -> dict[str, Grid]:
        """The integer grid of every value on one (``transforms/grid.py``), computed on first use."""
        if self._grids is None:
            try:
                self._grids = infer_grids(self.model)
            except (ValueError, TypeError, IndexError):  # a malformed model: no grid path (the float path reports it)
                self._grids = {}
        return self._grids

    def constant(self, name: str) -> np.ndarray | None:
        """The value of a constant initializer, None for any other value (or a malformed initializer)."""
        try:
            return self.const(name, "a constant", onnx.NodeProto())
        except (_SkipError, ModelError):
            return None

    def const(self, name: str, what: str, node: onnx.NodeProto) -> np.ndarray:
        """The value of a constant initializer read by ``node`` (validated: ModelError when it is malformed)."""
        if name in self._const_cache:
            return self._const_cache[name]
        if name not in self.init:
            raise _SkipError(f"{what} is not a constant initializer")
        v = _read.tensor_array(self.init[name], node, what)
        self._const_cache[name] = v
        return v

    def value_type(self, name: str) -> tuple[int, tuple[int | None, ...] | None] | None:
        """(element type, shape or None) of a value, as declared or inferred by onnx shape inference; None when
        unknown. Dimensions that are symbolic or unknown are None."""
        if self._shapes is None:
            self._shapes = _value_types(self.model)
        return self._shapes.get(name)

    def rank(self, name: str) -> int | None:
        vt = self.value_type(name)
        return None if vt is None or vt[1] is None else len(vt[1])

    def only_consumer(self, value: str) -> onnx.NodeProto | None:
        c = self.consumers.get(value, [])
        return c[0] if len(c) == 1 and value not in self.outputs else None


def _value_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int | None, ...] | None]]:
    """Element types and shapes as onnxruntime will see them: the graph inputs' declarations (which onnxruntime
    enforces on the feeds) and the initializers, propagated by onnx shape inference. The model's ``value_info`` and
    declared output shapes are left out: onnxruntime does not enforce them, so they may be wrong."""
    bare = onnx.ModelProto()
    bare.ir_version = model.ir_version
    bare.opset_import.extend(model.opset_import)
    bare.graph.node.extend(model.graph.node)
    bare.graph.input.extend(model.graph.input)
    bare.graph.initializer.extend(model.graph.initializer)
    for o in model.graph.output:
        bare.graph.output.add().name = o.name
    graph = infer_shapes(bare)  # best effort: what inference cannot say stays unknown
    if graph is None:
        graph = bare.graph
    out: dict[str, tuple[int, tuple[int | None, ...] | None]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.elem_type:
            continue
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape"):
            shape = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim)
        out[vi.name] = (tt.elem_type, shape)
    for t in model.graph.initializer:
        out[t.name] = (t.data_type, tuple(int(d) for d in t.dims))
    return out


def _broadcasts_into(p: tuple[int, ...], x: tuple[int | None, ...] | None) -> bool:
    """Whether a parameter of shape ``p`` broadcasts into ``x`` without changing ``x``'s shape (``x`` None: its
    shape is unknown, which only a scalar is sure to do)."""
    if not p:
        return True
    if x is None or len(p) > len(x):
        return False
    return all(dp == 1 or dx == dp for dp, dx in zip(reversed(p), reversed(x), strict=False))


def _is_qonnx(node: onnx.NodeProto | None, ops: tuple[str, ...]) -> bool:
    return node is not None and node.domain in QONNX_DOMAINS and node.op_type in ops


def _same_as_float32(v: np.ndarray, kind: str) -> bool:
    """Whether a quantizer parameter of another element type than float32 leaves QONNX Quant's codes those of its
    float32 computation (docs/ops.md, Quant: a float64 scale makes ``x / scale`` float64, an integer or float64
    zero point makes ``+ zeropt`` and the rounding float64). ``kind`` "scale": a power of two within float32's normal
    range (``x / scale`` is then exact, or over- or underflows to the same clamped code, in both); "zeropt": 0 (the
    float32 quotient plus 0 is itself, and rounding a float32 value gives the same integer in either type)."""
    if v.dtype not in (np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        return False
    flat = v.astype(np.float64).ravel()
    if flat.size == 0 or not np.all(flat == flat[0]):
        return False
    x = float(flat[0])
    if kind == "zeropt":
        return x == 0.0
    if not (np.isfinite(x) and x > 0):
        return False
    m, e = np.frexp(x)
    return bool(m == 0.5) and -125 <= int(e) - 1 <= 127


def _per_tensor(v: np.ndarray, what: str, x_shape: tuple[int | None, ...] | None, kind: str = "") -> float:
    """The one value of a per-tensor quantizer parameter: float32 (or of ``kind`` "scale" / "zeropt", another type
    whose value gives the float32 computation's codes: :func:`_same_as_float32`), all elements equal, and of a shape
    that broadcasts into the quantized tensor ``x_shape`` without changing it (else the quantizer's output is not x's
    shape, or the float path refuses it)."""
    if v.dtype != np.float32 and not (kind and _same_as_float32(v, kind)):
        raise TypeSkipError(f"{what} is {v.dtype}, integer mode takes float32")
    flat = v.ravel()
    if flat.size == 0 or not np.all(flat == flat[0]):
        raise _SkipError(f"{what} is not per-tensor (one value)")
    if not _broadcasts_into(tuple(v.shape), x_shape):
        raise _SkipError(f"{what} of shape {list(v.shape)} does not broadcast to the quantized tensor's shape "
                         f"{'(unknown)' if x_shape is None else list(x_shape)}")  # fmt: skip
    return float(flat[0])


def _per_channel_axis1(v: np.ndarray, x_shape: tuple[int | None, ...] | None) -> bool:
    """Whether a quantizer parameter has several values, one per channel (axis 1) of the tensor it quantizes."""
    if x_shape is None or len(x_shape) < 2 or v.size < 2 or v.ndim > len(x_shape) or np.all(v == v.ravel()[0]):
        return False
    full = (1,) * (len(x_shape) - v.ndim) + tuple(v.shape)
    return full[1] == x_shape[1] and all(d == 1 for i, d in enumerate(full) if i != 1)


def _activation(
    g: _Graph, value: str, channels: int | None = None
) -> tuple[dict[str, object], str, list[onnx.NodeProto], onnx.NodeProto]:
    """The activation quantizer feeding ``value`` (through Reshape/Flatten/MaxPool): its op attributes, float input
    name, the pass-through chain (first to last) and the quantizer node. ``channels``: a depthwise layer's input
    channels, for which a Quant straight before it may have one float32 scale per channel of a 4-D activation
    (axis 1): its attributes then carry ``act_channel_scales`` too."""
    chain: list[onnx.NodeProto] = []
    node = g.producer.get(value)
    while (
        node is not None
        and node.domain in STANDARD_DOMAINS
        and node.op_type in _PASS_THROUGH
        and len(node.output) == 1
        and node.input
        and node.input[0]
    ):
        chain.insert(0, node)
        node = g.producer.get(node.input[0])
    if node is None:
        raise NoQuantizerError("the activation is a graph input, not the output of a Quant / BipolarQuant")
    if not _is_qonnx(node, (*_QUANT, "BipolarQuant")):
        raise NoQuantizerError(f"the activation is produced by {node.op_type}, not by a Quant / BipolarQuant")
    n_in = 2 if node.op_type == "BipolarQuant" else 4
    if len(node.input) != n_in or not all(node.input) or len(node.output) != 1:
        raise _SkipError(f"the activation {node.op_type} does not have {n_in} inputs and one output")
    x_type = g.value_type(node.input[0])
    if x_type is not None and x_type[0] != onnx.TensorProto.FLOAT:
        raise _SkipError("the quantized activation is not float32")
    x_shape = None if x_type is None else x_type[1]
    s_value = g.const(node.input[1], "the activation scale", node)
    if node.op_type == "BipolarQuant" and s_value.dtype.kind not in "f":  # its schema: float scales only
        raise TypeSkipError(f"the BipolarQuant's scale is {s_value.dtype} (onnxruntime takes a float type only)")
    channel_scales = None
    if (
        channels is not None
        and node.op_type in _QUANT
        and not chain
        and s_value.dtype == np.float32
        and x_shape is not None
        and len(x_shape) == 4
        and x_shape[1] == channels
        and _per_channel_axis1(s_value, x_shape)
    ):
        channel_scales = s_value.ravel()
        if not np.all(np.isfinite(channel_scales) & (channel_scales > 0)):
            raise _SkipError("an activation scale is not finite and positive")
        s = float(channel_scales[0])
    else:
        if _per_channel_axis1(s_value, x_shape):
            # the grid path may still read the quantizer's output as one per-tensor grid (scales that are integer
            # multiples of the finest one)
            raise TypeSkipError("the activation scale is per channel, which the fused quantizer takes for a depthwise "
                                "layer only (this layer sums channels of different steps)")  # fmt: skip
        s = _per_tensor(s_value, "the activation scale", x_shape, "scale")
    if not (np.isfinite(s) and s > 0):
        raise _SkipError(f"the activation scale {s!r} is not finite and positive")
    if node.op_type == "BipolarQuant":
        return {"act_scale": s, "act_bipolar": 1}, node.input[0], chain, node
    z = _per_tensor(g.const(node.input[2], "the activation zero point", node), "the activation zero point", x_shape,
                    "zeropt")  # fmt: skip
    b = g.const(node.input[3], "the activation bit width", node)
    if b.size != 1 or b.dtype not in _BITS_DTYPES:
        raise _SkipError("the activation bit width is not one float32, float64, int32 or int64 value")
    if not _broadcasts_into(tuple(b.shape), x_shape):
        raise _SkipError(f"the activation bit width of shape {list(b.shape)} does not broadcast to the activation")
    bits = float(b.ravel()[0])
    if not (np.isfinite(bits) and bits == int(bits) and 1 <= bits <= MAX_ACT_BITS):
        raise _SkipError(f"the activation bit width {bits:g} is not an integer in 1..{MAX_ACT_BITS}")
    if not (np.isfinite(z) and z == int(z)):
        raise _SkipError(f"the activation zero point {z!r} is not an integer")
    signed = _read.attr_bool(node, "signed", True)
    narrow = _read.attr_bool(node, "narrow", False)
    wide = wide_span_problem(int(bits), signed, narrow, z)
    if wide is not None:
        raise _SkipError(wide)
    rounding = _read.attr_string(node, "rounding_mode", "ROUND")
    assert rounding is not None
    if rounding.upper() not in _ROUNDING_MODES:
        raise _SkipError(f"the activation rounding mode {rounding!r} is not a QONNX rounding mode")
    if signed and int(bits) == 1 and z != 0:
        raise _SkipError("a signed 1-bit activation quantizer with a non-zero zero point")
    attrs: dict[str, object] = {
        "act_scale": s,
        "act_zeropt": z,
        "act_bits": int(bits),
        "act_signed": int(signed),
        "act_narrow": int(narrow),
        "act_rounding_mode": rounding,
    }
    if channel_scales is not None:
        if int(bits) > 8 or (signed and int(bits) == 1):
            raise _SkipError("a per-channel activation quantizer of more than 8 bits, or bipolar")
        attrs["act_channel_scales"] = [float(v) for v in channel_scales]
    return attrs, node.input[0], chain, node


def _weight_codes(
    g: _Graph, value: str, axis: int, evaluate: object, ndim: int
) -> tuple[np.ndarray, np.ndarray, onnx.NodeProto]:
    """Integer codes of a constant quantized weight of ``ndim`` dimensions and its per-output-channel scale (along
    ``axis``)."""
    node = g.producer.get(value)
    if not _is_qonnx(node, (*_QUANT, "BipolarQuant")):
        raise _SkipError("the weight is not the output of a Quant / BipolarQuant on a constant")
    assert node is not None
    n_in = 2 if node.op_type == "BipolarQuant" else 4
    if len(node.input) != n_in or not all(node.input) or len(node.output) != 1:
        raise _SkipError(f"the weight {node.op_type} does not have {n_in} inputs and one output")
    for i in node.input:
        g.const(i, "a weight quantizer input", node)
    if node.op_type in _QUANT:
        bits = g.const(node.input[3], "the weight bit width", node).ravel()
        if bits.size != 1 or not 1 <= float(bits[0]) <= 8:
            raise _SkipError("the weight bit width is not one value in 1..8")
    w = g.const(node.input[0], "the weight", node)
    s = g.const(node.input[1], "the weight scale", node)
    if w.dtype != np.float32 or s.dtype != np.float32:
        raise TypeSkipError("the weight or its scale is not float32")
    if w.ndim != ndim:
        raise _SkipError(f"the weight has {w.ndim} dimensions, the layer takes {ndim}")
    if w.size == 0:
        raise _SkipError(f"the weight of shape {list(w.shape)} has no element")
    try:
        (y,) = evaluate(g.model, [node])  # type: ignore[operator]
    except Exception as e:  # onnxruntime's error: the float path reports it, naming the quantizer
        raise _SkipError(f"the weight quantizer cannot be evaluated: {str(e).splitlines()[0][:300]}") from e
    y = numpy_helper.to_array(y)
    if y.shape != w.shape:
        raise _SkipError("the weight quantizer's output is not of the weight's shape (its parameters broadcast)")
    try:
        sb = np.broadcast_to(s, y.shape)
    except ValueError as e:
        raise _SkipError("the weight scale does not broadcast to the weight") from e
    s_ch = np.moveaxis(sb, axis, 0).reshape(sb.shape[axis], -1)
    if not np.all(s_ch == s_ch[:, :1]):
        raise _SkipError("the weight scale varies along another axis than the output channel")
    s_ch = s_ch[:, 0]
    if not (np.all(np.isfinite(s_ch)) and np.all(s_ch > 0)):
        raise _SkipError("the weight scale is not finite and positive")
    with np.errstate(all="ignore"):
        codes = np.rint(y.astype(np.float64) / sb.astype(np.float64))
    if not np.all(np.abs(codes) <= 255):  # bit width <= 8: |q - z| <= 255 for any zero point in range
        raise _SkipError("the weight codes (q - zero point) exceed 255 in magnitude")
    # The codes must reproduce the quantizer's output exactly: y = float32(code * scale) (Quant: (q - z) * s).
    if not np.array_equal((codes.astype(np.float32) * sb).view(np.uint32), y.astype(np.float32).view(np.uint32)):
        raise _SkipError("the weight quantizer's output is not code * scale (non-integer zero point?)")
    return codes.astype(np.int16), s_ch.astype(np.float64), node


def _layer_activation(
    g: _Graph, value: str, channels: int | None = None
) -> tuple[dict[str, object], float, str, list[onnx.NodeProto], str | None]:
    """The layer's activation quantizer: a Quant / BipolarQuant right before it (fused: the op reads its float input),
    else one synthesized from the activation's grid (the op reads the activation itself). Returns the ``act_*``
    attributes, the float64 scale of one code step, the value the op reads, the pass-through chain to replay and,
    on the grid path, a note naming the grid. ``channels``: see :func:`_activation` (with ``act_channel_scales``
    the returned scale is the first channel's)."""
    try:
        act, x_float, chain, _qnode = _activation(g, value, channels)
        note = "per-channel activation scales" if "act_channel_scales" in act else None
        return act, float(np.float64(act["act_scale"])), x_float, chain, note
    except (NoQuantizerError, TypeSkipError) as fast:
        # no quantizer to fuse, or one whose parameter types the fused quantizer does not take: the grid path reads
        # the activation as it is (other reasons, e.g. a malformed quantizer, leave the layer to the float path)
        vt = g.value_type(value)
        if vt is not None and vt[0] != onnx.TensorProto.FLOAT:
            kind = onnx.TensorProto.DataType.Name(vt[0]).lower() if vt[0] in onnx.TensorProto.DataType.values() else "?"
            raise _SkipError(f"{fast}, and the activation is {kind}, not float32") from fast
        try:
            ga = grid_activation(value, g.grids, g.producer, g.constant)
        except NoGridError as e:
            raise _SkipError(f"{fast}, and is on no integer grid") from e
        except _SkipError as e:
            raise _SkipError(f"{fast}; {e}") from e
        return ga.attrs, ga.scale, value, [], f"activation on the grid {ga.grid}"


def _depthwise_channels(g: _Graph, node: onnx.NodeProto) -> int | None:
    """The input channels of a 2-D depthwise Conv (group = the input channels, a constant weight [M, 1, kH, kW]),
    which may read a per-channel activation quantizer (each output sums one input channel's values); else None."""
    if node.op_type != "Conv" or len(node.input) < 2:
        return None
    group = _read.attr_int(node, "group", 1)
    w_type = g.value_type(node.input[1])
    if group is None or group < 2 or w_type is None or w_type[1] is None or len(w_type[1]) != 4:
        return None
    return group if w_type[1][1] == 1 else None


def _layer_weight(
    g: _Graph, node: onnx.NodeProto, axis: int, evaluate: object, ndim: int
) -> tuple[np.ndarray, np.ndarray, list[onnx.NodeProto], str | None]:
    """The layer's weight codes and per-output-channel float64 scale: from a Quant / BipolarQuant on a constant, else
    from the weight's constant subgraph and its grid. Also the subgraph's nodes and, on the grid path, a note."""
    value = node.input[1]
    try:
        codes, s_w, _wnode = _weight_codes(g, value, axis, evaluate, ndim)
        return codes, s_w, [], None
    except _SkipError as fast:
        if _is_qonnx(g.producer.get(value), (*_QUANT, "BipolarQuant")) and not isinstance(fast, TypeSkipError):
            raise  # the quantizer's own reason (the grid path would read the same quantizer)
        nodes = constant_subgraph(value, g.producer, set(g.init))
        if nodes is None:
            raise _SkipError(f"{fast}, and it is not computed from constant initializers only") from fast
        w = constant_value(g.model, value, nodes, lambda n: g.const(n, "a weight input", node), evaluate)  # type: ignore[arg-type]
        grid = g.grids.get(value)
        if grid is None:  # a float weight a quantizer wrote out already: its per-channel grid from its values
            grid = inferred_weight_grid(w, axis)
        try:
            codes, s_w = grid_weight_codes(w, grid, axis, ndim)
        except NoGridError as e:
            raise _SkipError(f"{fast}, and its values are on no integer grid") from e
        what = "constant weight" if not nodes else f"weight computed by {' -> '.join(n.op_type for n in nodes)}"
        return codes, s_w, nodes, f"{what} on the grid {grid}"


def _bias_value(g: _Graph, name: str, node: onnx.NodeProto, evaluate: object) -> np.ndarray:
    """The bias: a constant initializer, or computed from constants (e.g. a bias quantizer on a constant)."""
    if name in g.init:
        return g.const(name, "the bias", node)
    nodes = constant_subgraph(name, g.producer, set(g.init))
    if not nodes:
        raise _SkipError("the bias is not computed from constant initializers only")
    try:
        return constant_value(g.model, name, nodes, lambda n: g.const(n, "a bias input", node), evaluate)  # type: ignore[arg-type]
    except _SkipError as e:
        raise _SkipError(str(e).replace("weight", "bias")) from e


def _fold_bn(g: _Graph, out: str, s: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, onnx.NodeProto] | None:
    """The BatchNormalization that only ``out`` feeds, folded into (s, b); None (it stays a node, for onnxruntime to
    run or refuse) when it is not a plain inference-mode BatchNormalization on float32 per-channel constants."""
    bn = g.only_consumer(out)
    if bn is None or bn.op_type != "BatchNormalization" or bn.domain not in STANDARD_DOMAINS or len(bn.output) != 1:
        return None
    if len(bn.input) != 5 or not all(bn.input) or bn.input[0] != out:
        return None
    if _read.standard_node_problem(bn, g.model) is not None:
        return None
    try:
        if _read.attr_int(bn, "training_mode", 0) or _read.attr_int(bn, "spatial", 1) != 1:
            return None
        eps = float(np.float32(_read.attr_float(bn, "epsilon", 1e-5)))
        params = [g.const(i, "a BatchNormalization parameter", bn) for i in bn.input[1:5]]
    except (_SkipError, ModelError):
        return None
    if any(p.dtype != np.float32 or p.shape != s.shape for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    with np.errstate(all="ignore"):
        gk = gamma / np.sqrt(var + eps)
        return s * gk, (b - mean) * gk + beta, bn


def _conv_attrs(node: onnx.NodeProto, kernel: tuple[int, ...]) -> dict[str, object]:
    """The Conv attributes QConv takes, read and checked (a 2-D convolution with weight spatial dims ``kernel``);
    anything else leaves the layer on the float path, where onnxruntime judges it."""
    auto_pad = _read.attr_string(node, "auto_pad", "NOTSET")
    if auto_pad != "NOTSET":
        raise _SkipError("auto_pad is not supported (use pads)")
    attrs: dict[str, object] = {}
    for key, length, low, high in (
        ("strides", 2, 1, _MAX_CONV_STRIDE),
        ("pads", 4, 0, _MAX_GEOMETRY),
        ("dilations", 2, 1, _MAX_GEOMETRY),
        ("kernel_shape", 2, 1, _MAX_GEOMETRY),
    ):
        v = _read.attr_ints(node, key, None, length=length)
        if v is None:
            continue
        if any(not low <= x <= high for x in v):
            raise _SkipError(f"attribute '{key}' {v} has a value outside [{low}, {high}] (QConv's limits)")
        attrs[key] = v
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:  # type: ignore[arg-type]
        raise _SkipError(f"attribute 'kernel_shape' {attrs['kernel_shape']} is not the weight's {list(kernel)}")
    group = _read.attr_int(node, "group", None)
    if group is not None:
        if group < 1:
            raise _SkipError(f"attribute 'group' {group} is below 1")
        attrs["group"] = group
    return attrs


def _replay(
    chain: list[onnx.NodeProto], src: str, name: str, new_nodes: list[onnx.NodeProto], renames: dict[str, str]
) -> str:
    """The pass-through chain replayed on the float input ``src`` (appended to ``new_nodes``); returns the value the
    layer reads. Each copy takes its original's name once the original has gone from the graph (lower_integer
    renames it), so that onnxruntime's errors name the user's node."""
    for c in chain:
        nc = onnx.NodeProto()
        nc.CopyFrom(c)
        nc.name = f"{_read.node_name(c)}__int_{name}"
        renames[nc.name] = _read.node_name(c)
        nc.input[0] = src
        nc.output[0] = f"{c.output[0]}__int_{name}"
        src = nc.output[0]
        new_nodes.append(nc)
    return src


def _lower_activation_matmul(
    g: _Graph, node: onnx.NodeProto, first: tuple[dict[str, object], float, str, list[onnx.NodeProto], str | None],
    backend: str, weight_problem: str,
) -> _Lowered:  # fmt: skip
    """A MatMul of two quantized activations (attention's scores and their product with the values): both read
    through their quantizers (or grids) as integer values, onnxruntime's MatMul sums them exactly where float32 can,
    one float64 rescale by the product of the two scales (the float-exact backend; the engine has no op for it).
    ``first``: the first operand's ``_layer_activation`` (the caller's)."""
    name = _read.node_name(node)
    if backend == "engine":
        raise _SkipError(f"{weight_problem}; a MatMul of two activations runs on the float-exact backend only")
    try:
        acts = [first, _layer_activation(g, node.input[1])]
    except _SkipError as e:
        raise _SkipError(f"{weight_problem}, and as a product of two activations: {e}") from e
    t0, t1 = g.value_type(node.input[0]), g.value_type(node.input[1])
    k = t0[1][-1] if t0 is not None and t0[1] else None
    n = t1[1][-1] if t1 is not None and t1[1] and len(t1[1]) >= 2 else None
    if k is None or n is None or len(t0[1]) < 2:  # type: ignore[index, arg-type]
        raise _SkipError(f"{weight_problem}; a product of two activations needs both operands at least 2-D with "
                         "known inner and output dimensions")  # fmt: skip
    bound = k * _act_max(acts[0][0]) * _act_max(acts[1][0])
    if bound >= FLOAT_EXACT_LIMIT:
        raise _SkipError(f"{weight_problem}; the product of two activations could sum to {bound}: float32 would not "
                         f"add it exactly (integer mode needs < {FLOAT_EXACT_LIMIT})")  # fmt: skip
    new_nodes: list[onnx.NodeProto] = []
    renames: dict[str, str] = {}
    base = f"{name}__int"
    codes = []
    for i, (act, _scale, x_float, chain, _note) in enumerate(acts):
        src = _replay(chain, x_float, f"{name}_{i}", new_nodes, renames)
        codes.append(f"{base}_codes{i}")
        new_nodes.append(helper.make_node("QuantCodes", [src], [codes[-1]], name=f"{name}__codes{i}", domain=DOMAIN,
                                          **act))  # fmt: skip
    core = helper.make_node("MatMul", codes, [f"{base}_acc"], name=name)
    new_nodes.append(core)
    scale = np.float64(acts[0][1]) * np.float64(acts[1][1])
    s_init = numpy_helper.from_array(np.full(n, scale), f"{base}_S")
    b_init = numpy_helper.from_array(np.zeros(n), f"{base}_B")
    new_nodes.append(helper.make_node("Rescale", [f"{base}_acc", s_init.name, b_init.name], [node.output[0]],
                                      name=f"{name}__rescale", domain=DOMAIN, axis=-1))  # fmt: skip
    notes = [n for n in (acts[0][4], acts[1][4]) if n] + ["a product of two activations"]
    return _Lowered(node, new_nodes, [s_init, b_init], [node], renames, core, notes)


def _lower(g: _Graph, node: onnx.NodeProto, evaluate: object, backend: str = "engine") -> _Lowered:
    op = node.op_type
    name = _read.node_name(node)
    if len(node.output) != 1 or not node.output[0]:
        raise _SkipError("the node does not have exactly one output")
    n_max = 2 if op == "MatMul" else 3
    if not 2 <= len(node.input) <= n_max or not node.input[0] or not node.input[1]:
        raise _SkipError(f"the node does not have 2{'' if n_max == 2 else ' or 3'} inputs")
    problem = _read.standard_node_problem(node, g.model)
    if problem is not None:  # onnxruntime refuses the node: the float path reports it
        raise _SkipError(problem)
    act, act_scale, x_float, chain, act_note = _layer_activation(g, node.input[0], _depthwise_channels(g, node))
    attrs: dict[str, object] = dict(act)
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    bias = None
    conv1d = op == "Conv" and g.rank(node.input[1]) == 3
    if op == "Conv":
        if conv1d:
            integer_conv1d.check_input(g.rank(node.input[0]))
        codes, s_w, w_nodes, w_note = _layer_weight(g, node, 0, evaluate, 3 if conv1d else 4)
        if conv1d:
            codes = codes[:, :, None, :]
        conv = integer_conv1d.as_2d(node) if conv1d else node
        attrs.update(_conv_attrs(conv, tuple(int(d) for d in codes.shape[2:])))
        k = int(np.prod(codes.shape[1:]))
        if bias_name is not None:
            c = _bias_value(g, bias_name, node, evaluate)
            if c.dtype != np.float32 or c.shape != (codes.shape[0],):
                raise _SkipError(f"the bias ({c.dtype}, shape {list(c.shape)}) is not float32 of shape "
                                 f"[{codes.shape[0]}]")  # fmt: skip
            bias = c.astype(np.float64)
        w_codes = codes
    elif op == "ConvTranspose":
        # W [C, M / group, kH, kW]: the output channel is axis 1 (within a group). Float-exact backend only (below).
        group = _read.attr_int(node, "group", 1)
        if g.rank(node.input[1]) != 4:
            raise _SkipError("a ConvTranspose that is not 2-D (integer mode takes 2-D transposed convolutions)")
        codes, s_w, w_nodes, w_note = _layer_weight(g, node, 1, evaluate, 4)
        assert group is not None
        if group < 1 or codes.shape[0] % group:
            raise _SkipError(f"the ConvTranspose's group {group} does not divide its {codes.shape[0]} input channels")
        s_w = np.tile(s_w, group)  # output channel g * (M / group) + j has the scale of j
        k = codes.shape[0] // group * int(np.prod(codes.shape[2:]))  # products per output, at most
        if bias_name is not None:
            c = _bias_value(g, bias_name, node, evaluate)
            if c.dtype != np.float32 or c.shape != s_w.shape:
                raise _SkipError(f"the bias ({c.dtype}, shape {list(c.shape)}) is not float32 of shape "
                                 f"{list(s_w.shape)}")  # fmt: skip
            bias = c.astype(np.float64)
        w_codes = codes
    elif op == "Gemm":
        alpha = _read.attr_float(node, "alpha", 1.0)
        beta = _read.attr_float(node, "beta", 1.0)
        if alpha != 1.0 or _read.attr_int(node, "transA", 0) != 0:
            raise _SkipError("Gemm with alpha != 1 or transA")
        if g.rank(node.input[0]) != 2:  # onnxruntime's Gemm takes a 2-D A only; QGemm would take any rank
            rank = g.rank(node.input[0])
            raise _SkipError(f"Gemm's input A has rank {'unknown' if rank is None else rank}, not 2")
        trans_b = _read.attr_int(node, "transB", 0)
        codes, s_w, w_nodes, w_note = _layer_weight(g, node, 0 if trans_b else 1, evaluate, 2)
        w_codes = codes if trans_b else codes.T
        k = w_codes.shape[1]
        if bias_name is not None:
            c = _bias_value(g, bias_name, node, evaluate)
            n_out = w_codes.shape[0]
            if c.dtype != np.float32 or not (
                (c.ndim <= 1 and c.size in (1, n_out)) or (c.ndim == 2 and c.shape[0] == 1 and c.size in (1, n_out))
            ):
                raise _SkipError(f"the Gemm bias ({c.dtype}, shape {list(c.shape)}) is not float32 per output column")
            bias = float(np.float32(beta)) * np.broadcast_to(c.astype(np.float64).reshape(-1), (n_out,))
    else:  # MatMul
        try:
            codes, s_w, w_nodes, w_note = _layer_weight(g, node, 1, evaluate, 2)
        except _SkipError as e:
            if node.input[1] in g.init or constant_subgraph(node.input[1], g.producer, set(g.init)) is not None:
                raise  # a constant weight the layer cannot take
            return _lower_activation_matmul(g, node, (act, act_scale, x_float, chain, act_note), backend, str(e))
        w_codes = codes.T
        k = w_codes.shape[1]
    if k > MAX_K:
        raise _SkipError(f"the reduction length {k} exceeds the engine's exact limit {MAX_K}")
    n = len(s_w) if op == "ConvTranspose" else w_codes.shape[0]  # (ConvTranspose: M, tiled over the groups)
    s = np.float64(act_scale) * s_w
    if "act_channel_scales" in act:  # depthwise: output channel j reads input channel j // (M / C) alone
        scales = np.asarray(act["act_channel_scales"], dtype=np.float32).astype(np.float64)
        if op != "Conv" or conv1d or w_codes.shape[1] != 1 or n % scales.size or attrs.get("group") != scales.size:
            raise _SkipError("the activation scale is per channel and the layer is not a 2-D depthwise convolution")
        s = np.repeat(scales, n // scales.size) * s_w
    b = np.zeros(n) if bias is None else np.array(bias, dtype=np.float64)
    if b.shape != (n,):
        raise _SkipError("the bias is not one value per output channel")
    wmax = int(np.max(np.abs(w_codes.astype(np.int64)))) if w_codes.size else 0
    fits = bool(np.all((w_codes >= -128) & (w_codes <= 127)))
    # wider weight codes whose channels each span at most 256 values: int8 codes and a shift per channel
    shift = None if fits else _weight_shift(w_codes, act, op)
    if backend == "mixed":  # the engine where the weight codes fit int8 (or do with a shift), else float-exact
        backend = "engine" if fits or shift is not None else "float"
    if "act_channel_scales" in act and (backend != "engine" or not (fits or shift is not None)):
        raise _SkipError("a per-channel activation scale runs on the int8 engine only (here the float-exact backend: "
                         "ORTQUANT_INTEGER_BACKEND=float, or weight codes wider than int8)")  # fmt: skip
    if op == "ConvTranspose":  # no engine op: onnxruntime's ConvTranspose on the integer values, where exact
        if backend == "engine" and integer_backend() == "engine":
            raise _SkipError("ConvTranspose runs on the float-exact backend only (ORTQUANT_INTEGER_BACKEND=engine)")
        backend = "float"
        if k * _act_max(act) * wmax >= FLOAT_EXACT_LIMIT:
            raise _SkipError(
                f"the ConvTranspose's sums could reach {k * _act_max(act) * wmax}: float32 would not "
                f"add them exactly (integer mode's transposed convolutions need < {FLOAT_EXACT_LIMIT})"
            )
    out_name = node.output[0]
    removed = [node]
    # BatchNormalization normalizes axis 1: a layer's output channel for Conv, ConvTranspose, Gemm and a MatMul of
    # a 2-D activation, but not for a MatMul of rank 3 or more (its output channel is the last axis; axis 1 the
    # rows). A Quant's output has no inferred shape: read straight from one, the activation has its float input's
    # rank (the quantizer's parameters broadcast into that input without changing it: _per_tensor). Of unknown
    # rank, the engine's QGemm folds it and refuses any X but a 2-D one (x_rank); the float-exact MatMul does not.
    rows_rank = g.rank(node.input[0])
    if rows_rank is None and not chain:
        rows_rank = g.rank(x_float)
    fold_ok = op != "MatMul" or rows_rank == 2 or (rows_rank is None and backend != "float")
    folded = _fold_bn(g, out_name, s, b) if fold_ok else None
    if folded is not None and op == "MatMul" and rows_rank is None:
        attrs["x_rank"] = 2
    if folded is not None:
        s, b, bn = folded
        out_name = bn.output[0]
        removed.append(bn)
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(b))):
        raise _SkipError("the folded scale or bias is not finite")
    relu = g.only_consumer(out_name)
    if (
        relu is not None
        and relu.op_type == "Relu"
        and relu.domain in STANDARD_DOMAINS
        and list(relu.input) == [out_name]
        and len(relu.output) == 1
        and relu.output[0]
        and _read.standard_node_problem(relu, g.model) is None
    ):
        attrs["relu"] = 1
        out_name = relu.output[0]
        removed.append(relu)
    new_nodes: list[onnx.NodeProto] = []
    renames: dict[str, str] = {}
    src = _replay(chain, x_float, name, new_nodes, renames)
    base = f"{name}__int"
    notes = [n for n in (act_note, w_note) if n]
    tail: list[onnx.NodeProto] = []
    extra: list[onnx.TensorProto] = []
    if conv1d:  # [N, C, L] -> [N, C, 1, L] -> the 2-D layer -> [N, M, 1, L'] -> [N, M, L']
        opset = integer_conv1d.default_opset(g.model)
        un, un_inits = integer_conv1d.unsqueeze(src, f"{base}_x2d", f"{name}__unsqueeze", opset)
        sq, sq_inits = integer_conv1d.squeeze(f"{base}_y2d", out_name, f"{name}__squeeze", opset)
        new_nodes.append(un)
        src, out_name = un.output[0], sq.input[0]
        tail, extra = [sq], [*un_inits, *sq_inits]
        notes.append("1-D convolution as 2-D with height 1")
    s_init = numpy_helper.from_array(np.ascontiguousarray(s), f"{base}_S")
    b_init = numpy_helper.from_array(np.ascontiguousarray(b), f"{base}_B")
    if backend == "float" and k * _act_max(act) * wmax < FLOAT_EXACT_LIMIT:
        act_attrs = {key: v for key, v in act.items()}
        codes = f"{base}_codes"
        new_nodes.append(helper.make_node("QuantCodes", [src], [codes], name=f"{name}__codes", domain=DOMAIN,
                                          **act_attrs))  # fmt: skip
        if op == "ConvTranspose":  # every attribute as the user wrote it, on the codes and the weight codes
            wf = numpy_helper.from_array(np.ascontiguousarray(w_codes.astype(np.float32)), f"{base}_Wf")
            ct = helper.make_node("ConvTranspose", [codes, wf.name], [f"{base}_acc"], name=name)
            ct.attribute.extend(node.attribute)
            new_nodes.append(ct)
            axis = 1
        elif op == "Conv":
            wf = numpy_helper.from_array(np.ascontiguousarray(w_codes.astype(np.float32)), f"{base}_Wf")
            conv_attrs = {key: v for key, v in attrs.items() if key in ("strides", "pads", "dilations", "group",
                                                                        "kernel_shape")}  # fmt: skip
            # the user's node name: the product is where a wrong input shape shows (onnxruntime renames a Conv it
            # rewrites to NCHWc after its output, "<name>__int_acc_nchwc", which still holds the name)
            new_nodes.append(helper.make_node("Conv", [codes, wf.name], [f"{base}_acc"], name=name,
                                              **conv_attrs))  # fmt: skip
            axis = 1
        else:
            wf = numpy_helper.from_array(np.ascontiguousarray(w_codes.T.astype(np.float32)), f"{base}_Wf")
            new_nodes.append(helper.make_node("MatMul", [codes, wf.name], [f"{base}_acc"], name=name))
            axis = -1
        core = new_nodes[-1]
        new_nodes.append(
            helper.make_node("Rescale", [f"{base}_acc", s_init.name, b_init.name], [out_name], name=f"{name}__rescale",
                             domain=DOMAIN, axis=axis, relu=int(attrs.get("relu", 0))),
        )  # fmt: skip
        return _Lowered(node, new_nodes + tail, [wf, s_init, b_init, *extra], removed, renames, core, notes, w_nodes)
    if not fits and shift is None:
        raise _SkipError(
            "the weight codes (q - zero point) do not fit in int8, no shift per output channel puts them there, and "
            "float32 sums would not be exact"
        )
    if shift is not None:  # w_shift: the engine's codes w - shift, the shift times the codes' sums added back
        w_codes = w_codes - shift.reshape((-1,) + (1,) * (w_codes.ndim - 1))
        attrs["w_shift"] = [int(v) for v in shift]
        attrs["xnor"] = 0  # never the bit kernels (their weights are -1 and +1 unshifted)
        notes.append("weights wider than int8: int8 codes and a shift per output channel")
    inits = [numpy_helper.from_array(np.ascontiguousarray(w_codes.astype(np.int8)), f"{base}_W"), s_init, b_init]
    qop = "QConv" if op == "Conv" else "QGemm"
    core = helper.make_node(
        qop, [src, *(t.name for t in inits)], [out_name], name=name, domain=DOMAIN, **attrs
    )  # the user's node name: the kernel's errors ("QConv node '<name>'") name the layer of the model
    new_nodes.append(core)
    return _Lowered(node, new_nodes + tail, [*inits, *extra], removed, renames, core, notes, w_nodes)


def _evaluate_default(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> list[onnx.TensorProto]:
    from ortquant.transforms.fold_weight_quantizers import evaluate_nodes

    return evaluate_nodes(model, nodes)


def _bit_kernel(low: _Lowered) -> str | None:
    """The bit kernel the lowered QConv / QGemm takes (core/integer/xnor.h), or None for the int8 engine: with weight
    codes all -1 or +1, "XNOR-popcount" for a bipolar activation (BipolarQuant, or Quant's signed 1-bit case with
    zero point 0) and "bit-serial" when the activation's stored codes are in [0, 3] (the values a = q - z and 0
    span at most 3: 1- and 2-bit activations)."""
    op = low.core
    if op is None or op.domain != DOMAIN:
        return None
    a = {x.name: helper.get_attribute_value(x) for x in op.attribute}
    if "w_shift" in a or not a.get("xnor", 1):
        return None
    w = next((t for t in low.initializers if t.name == op.input[1]), None)
    if w is None or not bool(np.all(np.abs(numpy_helper.to_array(w).astype(np.int64)) == 1)):
        return None
    bits, signed, z = int(a.get("act_bits", 8)), int(a.get("act_signed", 1)), float(a.get("act_zeropt", 0.0))
    if a.get("act_bipolar", 0) == 1 or (bits == 1 and signed == 1 and z == 0.0):
        return "XNOR-popcount"
    narrow = int(a.get("act_narrow", 0))
    lo = -(1 << (bits - 1)) + narrow if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1 - narrow
    span = max(hi - z, 0) - min(lo - z, 0)  # the values a = q - z and 0 (padding)
    return "bit-serial" if span <= 3 else None


def _engine_kind(op: onnx.NodeProto) -> str:
    """How a QConv / QGemm off the bit kernels runs: activations of 9 to 16 bits on two byte planes, 17 to 24 on
    three."""
    bits = int(next((helper.get_attribute_value(a) for a in op.attribute if a.name == "act_bits"), 8))
    if bits <= 8:
        return "int8 engine"
    return f"int8 engine on {'two' if bits <= 16 else 'three'} byte planes"


def _plan(model: onnx.ModelProto) -> tuple[list[LayerDecision], list[_Lowered]]:
    g = _Graph(model)
    backend = integer_backend()
    decisions: list[LayerDecision] = []
    lowered: list[_Lowered] = []
    for node in model.graph.node:
        if node.domain not in STANDARD_DOMAINS or node.op_type not in LAYER_OPS:
            continue
        name = _read.node_name(node)
        try:
            low = _lower(g, node, _evaluate_default, backend)
        except (_SkipError, ModelError) as e:  # a malformed node stays as it is, for onnxruntime to run or refuse
            decisions.append(LayerDecision(name, node.op_type, False, str(e)))
            continue
        lowered.append(low)
        folded = [n.op_type for n in low.removed[1:]]
        extra = f" (+ {' + '.join(folded)} folded)" if folded else ""
        assert low.core is not None
        if low.core.domain != DOMAIN:
            kind = f"{low.core.op_type} on integer values (float-exact)"
        else:
            kind = f"{low.core.op_type} ({_bit_kernel(low) or _engine_kind(low.core)})"
        notes = f"; {'; '.join(low.notes)}" if low.notes else ""
        decisions.append(LayerDecision(name, node.op_type, True, f"{kind}{extra}{notes}"))
    return decisions, lowered


def integer_plan(model: onnx.ModelProto) -> list[LayerDecision]:
    """Per Conv / MatMul / Gemm node of the top-level graph: integer or float path, and why."""
    return _plan(model)[0]


def lower_integer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Lower every quantized layer integer mode covers (see the module doc); ``model`` itself when none."""
    _decisions, lowered = _plan(model)
    if not lowered:
        return model
    out = copy_model(model)
    replace = {id_(low.node): low for low in lowered}
    removed = {id_(n) for low in lowered for n in low.removed}
    weight_nodes = {id_(n) for low in lowered for n in low.constant_nodes}
    nodes: list[onnx.NodeProto] = []
    for n in out.graph.node:
        key = id_(n)
        if key in replace:
            nodes.extend(replace[key].new_nodes)
        elif key not in removed:
            nodes.append(n)
    # Quantizers and pass-through nodes nobody reads any more go: only those, and only those the lowering left
    # unread (a node nobody read before stays, for onnxruntime and the other transforms to run or refuse as in the
    # default mode).
    outputs = {o.name for o in out.graph.output}
    read_before = {i for n in all_nodes(out.graph) for i in n.input} | outputs
    while True:
        used = {i for n in nodes for i in n.input} | outputs
        dead = [
            n
            for n in nodes
            if not any(o in used for o in n.output)
            and any(o in read_before for o in n.output)
            and (
                _is_qonnx(n, (*_QUANT, "BipolarQuant"))
                or (n.domain in STANDARD_DOMAINS and n.op_type in _PASS_THROUGH)
                or id_(n) in weight_nodes
            )
        ]
        if not dead:
            break
        dead_ids = {id(n) for n in dead}
        nodes = [n for n in nodes if id(n) not in dead_ids]
    taken = {n.name for n in nodes}
    for n in nodes:
        want = next((low.renames[n.name] for low in lowered if n.name in low.renames), None)
        if want is not None and want not in taken:
            taken.discard(n.name)
            n.name = want
            taken.add(want)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(t for low in lowered for t in low.initializers)
    keep_read_initializers(out.graph)  # the lowered layers' weights and quantizer parameters nothing reads now
    produced = {o for n in nodes for o in n.output}
    vis = [v for v in out.graph.value_info if v.name in produced]
    del out.graph.value_info[:]
    out.graph.value_info.extend(vis)
    if not any(i.domain == DOMAIN for i in out.opset_import):
        out.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return out


def id_(node: onnx.NodeProto) -> tuple[str, ...]:
    """A node's identity across a model copy: its op type and outputs (unique in a valid graph)."""
    return (node.op_type, *node.output)
