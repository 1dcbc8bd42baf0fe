"""numpy reference of the QONNX ops (spec: shared/specs/qonnx.md, decisions 5-8), float32 throughout."""

from __future__ import annotations

import numpy as np

F32 = np.float32


def _sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x)


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
    if m == "HALF_UP":
        return lambda x: _sign(x) * np.floor(np.abs(x) + F32(0.5))
    if m == "HALF_DOWN":
        return lambda x: _sign(x) * np.ceil(np.abs(x) - F32(0.5))
    raise ValueError(f"unknown rounding mode {mode!r}")


ROUNDING_MODES = ("ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN", "ROUND_TO_ZERO")


def int_bounds(signed: bool, narrow: bool, bitwidth: np.ndarray) -> tuple[np.float32, np.float32]:
    """min_int/max_int as float32. A float32 bitwidth is used in float32, an integer one exactly."""
    b = np.asarray(bitwidth).reshape(())
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
    """QONNX Quant/IntQuant: clamp before rounding, signed 1-bit gives +-1, float32 true division."""
    x = np.asarray(x, F32)
    scale = np.asarray(scale, F32)
    zeropt = np.asarray(zeropt, F32)
    bitwidth = np.asarray(bitwidth)
    q = x / scale + zeropt
    if signed and float(bitwidth.reshape(())) == 1.0:
        q = np.where(q >= F32(0), F32(1), F32(-1)).astype(F32)
    else:
        lo, hi = int_bounds(signed, narrow, bitwidth)
        q = np.where(q > hi, hi, q)
        q = np.where(q < lo, lo, q)
        q = round_mode_fn(rounding_mode)(q).astype(F32)
    y = (q - zeropt) * scale
    out_shape = np.broadcast_shapes(x.shape, scale.shape, zeropt.shape, bitwidth.shape)
    return np.broadcast_to(y, out_shape).astype(F32)
