"""numpy reference of the QONNX ops (spec: shared/specs/qonnx.md, decisions 5-8), float32 throughout, or float16
where the inputs are float16: numpy's own float16 arithmetic then does each step in float16 (docs/ops.md)."""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
F16 = np.float16


def float_arg(a: np.ndarray | float) -> np.ndarray:
    """A float operand: float16 arrays as they are, anything else as float32."""
    arr = np.asarray(a)
    return arr if arr.dtype == F16 else np.asarray(arr, F32)


def pow2_half(d: np.ndarray) -> np.ndarray:
    """2**d for float16 d, as numpy's float16 power gives it: 2**d correctly rounded to float32, then to float16."""
    d = np.asarray(d, F16)

    def one(v: float) -> np.float16:
        if math.isnan(v):
            return F16(np.nan)
        if v > 200:
            return F16(np.inf)
        if v < -200:
            return F16(0)
        return F16(F32(2.0**v))

    return np.vectorize(lambda v: one(float(v)), otypes=[F16])(d).reshape(d.shape)


def _sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x)


def _half_of(x: np.ndarray) -> np.generic:
    dt = np.asarray(x).dtype
    return dt.type(0.5) if dt in (F16, F32) else F32(0.5)


def round_mode_fn(mode: str):
    """The numpy function of a QONNX rounding-mode name (case-insensitive; ROUND_TO_ZERO = DOWN)."""
    m = mode.upper()
    if m in ("ROUND", "HALF_EVEN"):
        return np.round
    if m == "CEIL":
        return np.ceil
    if m == "FLOOR":
        return np.floor
    if m == "UP":
        return lambda x: _sign(x) * np.ceil(np.abs(x))
    if m in ("DOWN", "ROUND_TO_ZERO"):
        return np.fix
    # 0.5 in the dtype of x: |x| + 0.5 is rounded to float16 for float16 x, as in qonnx's numpy.
    if m == "HALF_UP":
        return lambda x: _sign(x) * np.floor(np.abs(x) + _half_of(x))
    if m == "HALF_DOWN":
        return lambda x: _sign(x) * np.ceil(np.abs(x) - _half_of(x))
    raise ValueError(f"unknown rounding mode {mode!r}")


ROUNDING_MODES = ("ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN", "ROUND_TO_ZERO")


def int_bounds(signed: bool, narrow: bool, bitwidth: np.ndarray) -> tuple[np.generic, np.generic]:
    """min_int/max_int: float32 for a float32 or integer bitwidth (an integer one computed exactly), float16 from
    float16 arithmetic for a float16 bitwidth (2**16 and above are inf there)."""
    b = np.asarray(bitwidth).reshape(())
    if b.dtype == F16:
        bh = F16(b)
        if signed:
            ph = pow2_half(bh - F16(1))[()]
            return ((-ph + F16(1)) if narrow else -ph), ph - F16(1)
        ph = pow2_half(bh)[()]
        return F16(0) * bh, (ph - F16(2) if narrow else ph - F16(1))
    if b.dtype.kind in "iu":
        bw = int(b)
        if signed:
            lo, hi = -(2 ** (bw - 1)) + (1 if narrow else 0), 2 ** (bw - 1) - 1
        else:
            lo, hi = 0, 2**bw - (2 if narrow else 1)
        return F32(lo), F32(hi)
    bf = F32(b)
    if signed:
        p = F32(2) ** (bf - F32(1))
        return (-p + F32(1) if narrow else -p), p - F32(1)
    p = F32(2) ** bf
    return F32(0) * bf, (p - F32(2) if narrow else p - F32(1))


def quant(
    x: np.ndarray,
    scale: np.ndarray,
    zeropt: np.ndarray,
    bitwidth: np.ndarray,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "ROUND",
) -> np.ndarray:
    """QONNX Quant/IntQuant: clamp before rounding, signed 1-bit gives +-1, true division, float32 output.

    x, scale and zeropt are float32, or float16 arrays kept as they are: numpy then computes x / scale in float16
    when both are float16, and the rest in float16 when zeropt is too (else in float32).
    """
    x, scale, zeropt = float_arg(x), float_arg(scale), float_arg(zeropt)
    bitwidth = np.asarray(bitwidth)
    q = x / scale + zeropt
    dt = q.dtype
    if signed and float(bitwidth.reshape(())) == 1.0:
        q = np.where(q >= dt.type(0), dt.type(1), dt.type(-1)).astype(dt)
    else:
        lo, hi = int_bounds(signed, narrow, bitwidth)
        # compared exactly, assigned cast to q's dtype (qonnx's max_int.astype(y.dtype))
        q = np.where(q > hi, dt.type(hi), q)
        q = np.where(q < lo, dt.type(lo), q)
        q = round_mode_fn(rounding_mode)(q).astype(dt)
    y = (q - zeropt) * scale
    out_shape = np.broadcast_shapes(x.shape, scale.shape, zeropt.shape, bitwidth.shape)
    return np.broadcast_to(y, out_shape).astype(F32)
