"""Integer-mode rule: a layer's activation that is already on an integer grid (``transforms/grid.py``).

When no Quant / BipolarQuant sits right before the layer (the activation comes through a Transpose, a Mul by a
scale, a MultiThreshold, a residual Add, ...) but ``infer_grids`` puts it on a per-tensor grid
``s * (q - z)``, q an integer in ``[lo, hi]``, the lowered op reads the activation itself and recovers its codes
with a synthesized quantizer: ``act_scale = float32(s)``, ``act_zeropt = z``, the narrowest QONNX bit range that
holds ``[lo, hi]`` (unsigned when ``lo >= 0``), rounding ``ROUND``. Since the value is ``s * (q - z)`` up to the
float32 rounding of the ops that computed it, ``x / float32(s) + z`` is within a few 2^-24 relative of ``q``, so
the rounding gives ``q`` exactly (``|q - z|`` is below 2^17 here; wider codes only on a power-of-two scale, where
the values and the division are exact). The layer's output rescale uses the grid's float64 scale ``s`` itself
(:attr:`GridActivation.scale`), not ``float32(s)``.

- A zero point ``z`` that is half an odd integer (MultiThreshold with ``out_bias = -out_scale / 2``: values
  ``+-s/2``) is the grid ``s/2 * (2q - 2z)`` with zero point 0 and odd codes.
- Codes that are always -1 or +1 (the half-integer case above with ``q`` in two levels, or a grid whose values come
  from a BipolarQuant / signed 1-bit Quant through ops that keep each value or scale it by a nonzero constant) take
  the bipolar quantizer (``act_bipolar``): the binary-weight bit kernels then apply.
- Grids of 9 to 16 bits take the wide quantizer (the op runs the int8 engine on two byte planes of the codes), when
  the values ``q - z`` and 0 span at most 2^16 levels (:func:`wide_span_problem`); grids of 17 to 24 bits (e.g. a
  layer's unquantized sum read by the next layer) three byte planes, 2^24 levels, when the scale is a power of two
  (:data:`WIDE_POW2_BITS`). A per-channel grid with zero point 0 whose scales are integer multiples of the finest
  one is read as that one's per-tensor grid (:func:`per_tensor_view`). Grids that need more bits, other per-channel
  grids and zero points beyond 2^16 stay on the float path, with the reason.
- A grid that a graph input's declared type promises (``Grid.declared``: a ``finn_datatype`` annotation) is not
  proven: the op gets ``act_check`` (naming that input and type) and checks at run time that every value it reads
  is within 0.01 of a code of the quantizer's range (qonnx's own tolerance when it rounds annotated tensors),
  failing with that name otherwise, instead of rounding values the float network would have used as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from ortquant.transforms._integer_common import NoGridError, SkipError
from ortquant.transforms._util import QONNX_DOMAINS, STANDARD_DOMAINS
from ortquant.transforms.grid import Grid, is_power_of_two, make_grid

Constant = Callable[[str], "np.ndarray | None"]  # a constant initializer's value, None for other values
_MAX_ZEROPT = 1 << 16  # the in-kernel quantizer's zero point limit (core/integer/qlayer.cc make_act_quant)
MAX_ACT_BITS = 24  # the in-kernel quantizer's widest codes (9 to 16 bits: two byte planes, 17 to 24: three)
WIDE_POW2_BITS = 16  # a grid needing more bits is read only on a power-of-two scale (module doc)
# Ops whose output values are each one of the input's values (or the input's value times a nonzero constant):
# a tensor that never holds 0 keeps that property through them.
_KEEP_NONZERO = ("Identity", "Dropout", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "MaxPool", "Slice")


@dataclass(frozen=True)
class GridActivation:
    """The synthesized activation quantizer (``act_*`` attributes of QConv / QGemm / QuantCodes), the float64
    scale of one code step, and the grid it came from."""

    attrs: dict[str, object]
    scale: float
    grid: Grid


def _never_zero(value: str, producer: dict[str, onnx.NodeProto], constant: Constant) -> bool:
    """Whether every value of ``value`` is nonzero by construction: a BipolarQuant (or signed 1-bit Quant) output
    through ops that keep values or multiply them by nonzero constants."""
    for _ in range(1000):
        node = producer.get(value)
        if node is None or not node.input:
            return False
        if node.domain in QONNX_DOMAINS:
            if node.op_type == "BipolarQuant":
                return True
            if node.op_type in ("Quant", "IntQuant") and len(node.input) == 4:
                bits, z = constant(node.input[3]), constant(node.input[2])
                signed = next((a.i for a in node.attribute if a.name == "signed"), 1)
                return (
                    bits is not None and bits.size == 1 and float(bits.ravel()[0]) == 1.0 and bool(signed)
                    and z is not None and bool(np.all(z == 0))
                )  # fmt: skip
            if node.op_type != "DebugMarker":
                return False
        elif node.domain not in STANDARD_DOMAINS:
            return False
        elif node.op_type in ("Mul", "Div") and len(node.input) == 2:
            c = constant(node.input[1])
            if c is None and node.op_type == "Mul":
                c, other = constant(node.input[0]), node.input[1]
            else:
                other = node.input[0]
            if c is None or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c == 0):
                return False
            value = other
            continue
        elif node.op_type not in _KEEP_NONZERO:
            return False
        value = node.input[0]
    return False


def _bit_range(lo: int, hi: int) -> tuple[int, int, int]:
    """(bits, signed, narrow) of the narrowest QONNX Quant range that holds [lo, hi] (unsigned when lo >= 0; signed
    ones of at least 2 bits: signed 1-bit is the bipolar quantizer)."""
    if lo >= 0:
        return max(1, int(hi).bit_length()), 0, 0
    bits = 2
    while -(1 << (bits - 1)) > lo or hi > (1 << (bits - 1)) - 1:
        bits += 1
    return bits, 1, int(lo > -(1 << (bits - 1)))


def wide_levels(bits: int) -> int:
    """How many levels a wide quantizer's values ``q - z`` and 0 may span: 2^16 (two byte planes, 9 to 16 bits) or
    2^24 (three, 17 to 24 bits)."""
    return 1 << (16 if bits <= 16 else 24)


def wide_span_problem(bits: int, signed: bool, narrow: bool, zeropt: float) -> str | None:
    """Why the in-kernel quantizer refuses a 9- to 24-bit activation (core/integer/qlayer.cc make_act_quant): its
    values ``q - z`` together with 0 (the padding) must span at most :func:`wide_levels` levels, the range of its
    byte planes. None when it takes it (and for 8 bits or fewer)."""
    if bits <= 8:
        return None
    lo, hi = (-(1 << (bits - 1)) + int(narrow), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1 - int(narrow))
    z = int(zeropt)
    lo0, hi0 = min(lo - z, 0), max(hi - z, 0)
    if hi0 - lo0 + 1 > wide_levels(bits):
        return (
            f"the {bits}-bit activation's values q - z in [{lo - z}, {hi - z}] and 0 span {hi0 - lo0 + 1} levels; "
            f"integer mode takes at most {wide_levels(bits)}"
        )
    return None


def per_tensor_view(grid: Grid) -> Grid | None:
    """A per-channel grid with zero point 0 whose scales are integer multiples r of the finest one ``s`` as the
    per-tensor grid ``s * q'``, ``q' = r * q`` (a layer's sum on per-channel power-of-two weight scales): the same
    values, codes ``max(r)`` times wider. None for other per-channel grids."""
    if np.any(grid.zero_point != 0):
        return None
    s = float(np.min(grid.scale))
    r = np.asarray(grid.scale, dtype=np.float64) / s
    if not np.all(r == np.rint(r)):
        return None
    lo = float(np.min(r * grid.lo))
    hi = float(np.max(r * grid.hi))
    flat = make_grid(s, 0.0, lo, hi)
    return None if flat is None else dataclasses.replace(flat, declared=grid.declared)


def grid_activation(
    value: str, grids: dict[str, Grid], producer: dict[str, onnx.NodeProto], constant: Constant
) -> GridActivation:
    """The synthesized quantizer that recovers the codes of ``value`` from its grid (module doc); SkipError with the
    reason when there is none."""
    grid = grids.get(value)
    if grid is None:
        raise NoGridError("the activation is on no integer grid")
    if not grid.per_tensor:
        flat = per_tensor_view(grid)
        if flat is None:
            raise SkipError(
                f"the activation's grid is per-channel ({grid}); integer mode takes per-tensor activations (or "
                "per-channel scales that are integer multiples of the finest one, with zero point 0)"
            )
        grid = flat
    s, z, lo, hi = float(grid.scale), float(grid.zero_point), int(grid.lo), int(grid.hi)
    never_zero = False
    if z != np.rint(z):
        if 2 * z != np.rint(2 * z):
            raise SkipError(f"the activation's grid {grid} has a zero point that is not an integer or a half")
        # s * (q - z) = (s / 2) * (2q - 2z): zero point 0, odd codes
        s, lo, hi, z = s / 2, int(2 * lo - 2 * z), int(2 * hi - 2 * z), 0.0
        never_zero = True
    s32 = float(np.float32(s))
    if not (np.isfinite(s32) and s32 > 0 and np.float32(s32) >= np.finfo(np.float32).tiny):
        raise SkipError(f"the activation's grid scale {s!r} is not a normal float32")
    if abs(z) > _MAX_ZEROPT:
        raise SkipError(f"the activation's grid zero point {z:g} exceeds {_MAX_ZEROPT} in magnitude")
    if z == 0 and (lo, hi) == (-1, 1) and (never_zero or _never_zero(value, producer, constant)):
        return GridActivation(_checked({"act_scale": s32, "act_bipolar": 1}, grid), s, grid)
    bits, signed, narrow = _bit_range(lo, hi)
    if bits > 8 and hi - lo <= 255:  # the same values, codes shifted to start at 0: q - lo in [0, hi - lo]
        z, lo, hi = z - lo, 0, hi - lo
        bits, signed, narrow = _bit_range(lo, hi)
        if abs(z) > _MAX_ZEROPT:
            raise SkipError(f"the activation's grid zero point {z:g} exceeds {_MAX_ZEROPT} in magnitude")
    for width in (16, MAX_ACT_BITS):  # as above, into two byte planes, or three
        if bits > width and hi - lo < 1 << width:
            z, lo, hi = z - lo, 0, hi - lo
            bits, signed, narrow = _bit_range(lo, hi)
            if abs(z) > _MAX_ZEROPT:
                raise SkipError(f"the activation's grid zero point {z:g} exceeds {_MAX_ZEROPT} in magnitude")
    if bits > MAX_ACT_BITS:
        raise SkipError(f"the activation's grid {grid} needs {bits} bits; integer mode takes at most {MAX_ACT_BITS}")
    if bits > WIDE_POW2_BITS and not is_power_of_two(s):
        raise SkipError(
            f"the activation's grid {grid} needs {bits} bits; integer mode reads more than {WIDE_POW2_BITS} bits "
            "only on a power-of-two scale (where float32 holds the values exactly)"
        )
    problem = wide_span_problem(bits, bool(signed), bool(narrow), z)
    if problem is not None:
        raise SkipError(f"on the activation's grid {grid}, {problem}")
    attrs: dict[str, object] = {
        "act_scale": s32,
        "act_zeropt": float(z),
        "act_bits": bits,
        "act_signed": signed,
        "act_narrow": narrow,
        "act_rounding_mode": "ROUND",
    }
    return GridActivation(_checked(attrs, grid), s, grid)


def _checked(attrs: dict[str, object], grid: Grid) -> dict[str, object]:
    """``attrs`` with ``act_check`` when the grid is declared by a graph input rather than proven."""
    return {**attrs, "act_check": f"input {grid.declared}"} if grid.declared else attrs
