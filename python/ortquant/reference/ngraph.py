"""numpy reference of nGraph Quantize / Dequantize (domain ``ngraph``).

Written from the spec (shared/specs/ort-custom-ops.md 4.1-4.2, decision 9), independent of the C++:

* Quantize: ``q = x / scale`` in the input precision (float32, or float16 for float16 input), rounded exactly by the
  mode's tie rule, plus the zero point exactly, saturated to the output type (NaN quotients give the zero point).
* Dequantize: ``(q - zero_point)`` in int64, converted to the real type, times scale in the real type.

Exactness: a float32 or float16 quotient converts to float64 exactly; ``floor`` and ``quotient - floor`` are exact
in float64 (the fraction needs no more bits than the quotient has), so comparing the fraction with 0.5 decides
every rounding without error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The nine nGraph rounding modes, with the tie rule each one means (nearest modes) or its direction.
ROUND_MODES = {
    "ROUND_NEAREST_TOWARD_INFINITY": "nearest, ties away from zero",
    "ROUND_NEAREST_TOWARD_ZERO": "nearest, ties toward zero",
    "ROUND_NEAREST_UPWARD": "nearest, ties toward +inf",
    "ROUND_NEAREST_DOWNWARD": "nearest, ties toward -inf",
    "ROUND_NEAREST_TOWARD_EVEN": "nearest, ties to even",
    "ROUND_TOWARD_INFINITY": "away from zero",
    "ROUND_TOWARD_ZERO": "toward zero",
    "ROUND_UP": "toward +inf",
    "ROUND_DOWN": "toward -inf",
}

QUANT_DTYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32)
REAL_DTYPES = (np.float32, np.float16)


def round_exact(q: np.ndarray, mode: str) -> np.ndarray:
    """Round float32/float16 values to integers by an nGraph mode name (case-insensitive), exactly.

    Returns float64 (integers, +-inf and NaN as they come).
    """
    m = mode.upper()
    if m not in ROUND_MODES:
        raise ValueError(f"unknown rounding mode {mode!r}")
    v = np.asarray(q).astype(np.float64)
    with np.errstate(invalid="ignore"):
        lo = np.floor(v)  # the integer at or below v
        hi = lo + 1.0  # the integer above v (when v is not an integer)
        frac = v - lo  # exact, in [0, 1)
        is_int = frac == 0.0
        below = frac < 0.5  # nearer to lo
        tie = frac == 0.5
        positive = v > 0.0
        if m == "ROUND_UP":
            r = np.where(is_int, v, hi)
        elif m == "ROUND_DOWN":
            r = lo
        elif m == "ROUND_TOWARD_ZERO":
            r = np.where(is_int, v, np.where(positive, lo, hi))
        elif m == "ROUND_TOWARD_INFINITY":
            r = np.where(is_int, v, np.where(positive, hi, lo))
        else:
            if m == "ROUND_NEAREST_TOWARD_INFINITY":
                at_tie = np.where(positive, hi, lo)
            elif m == "ROUND_NEAREST_TOWARD_ZERO":
                at_tie = np.where(positive, lo, hi)
            elif m == "ROUND_NEAREST_UPWARD":
                at_tie = hi
            elif m == "ROUND_NEAREST_DOWNWARD":
                at_tie = lo
            else:  # ROUND_NEAREST_TOWARD_EVEN
                at_tie = np.where(np.mod(lo, 2.0) == 0.0, lo, hi)
            r = np.where(is_int, v, np.where(tie, at_tie, np.where(below, lo, hi)))
        # +-inf and NaN pass through (floor/frac arithmetic above is meaningless for them).
        r = np.where(np.isfinite(v), r, v)
    return r


def _param_shape(shape: Sequence[int], axes: Sequence[int], scale: np.ndarray, zero_point: np.ndarray) -> tuple:
    """The broadcast shape of scale/zero_point: input dims at the (sorted) axes, 1 elsewhere (nGraph's rule);
    with no axes, one element each."""
    rank = len(shape)
    norm = []
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"axis {a} is out of range for rank {rank}")
        norm.append(a + rank if a < 0 else a)
    if len(set(norm)) != len(norm):
        raise ValueError(f"axes {list(axes)} repeat an axis")
    norm.sort()
    if not norm:
        if scale.size != 1 or zero_point.size != 1:
            raise ValueError("per-tensor scale and zero_point must have one element each")
        return (1,) * rank
    want = tuple(shape[a] for a in norm)
    if scale.shape != want or zero_point.shape != want:
        raise ValueError(f"scale and zero_point must have shape {want}, got {scale.shape} and {zero_point.shape}")
    return tuple(shape[d] if d in norm else 1 for d in range(rank))


def quantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray,
    axes: Sequence[int] = (),
    round_mode: str = "ROUND_NEAREST_TOWARD_EVEN",
) -> np.ndarray:
    """nGraph Quantize: ``saturate(round(x / scale) + zero_point)``; output dtype = zero_point's dtype.

    ``x`` and ``scale`` share a dtype (float32 or float16); negative axes count from the end.
    """
    x = np.asarray(x)
    scale = np.asarray(scale)
    zero_point = np.asarray(zero_point)
    if x.dtype not in REAL_DTYPES or scale.dtype != x.dtype:
        raise ValueError(f"input and scale must both be float32 or float16, got {x.dtype} and {scale.dtype}")
    if zero_point.dtype not in QUANT_DTYPES:
        raise ValueError(f"zero_point must be one of {QUANT_DTYPES}, got {zero_point.dtype}")
    p = _param_shape(x.shape, axes, scale, zero_point)
    s = scale.reshape(p)
    z = zero_point.astype(np.int64).reshape(p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = x / s  # numpy divides in the input dtype: the correctly rounded quotient
    assert q.dtype == x.dtype
    r = round_exact(q, round_mode)
    info = np.iinfo(zero_point.dtype)
    nan = np.isnan(r)
    # Clip far outside every range first (exact), then add the zero point in int64 and saturate.
    r = np.clip(np.where(nan, 0.0, r), -(2.0**40), 2.0**40).astype(np.int64)
    v = np.clip(r + z, info.min, info.max)
    v = np.where(np.broadcast_to(nan, v.shape), np.broadcast_to(z, v.shape), v)
    return v.astype(zero_point.dtype)


def dequantize(
    q: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray,
    axes: Sequence[int] = (),
) -> np.ndarray:
    """nGraph Dequantize: ``REAL(q - zero_point) * scale``; the difference in int64, output dtype = scale's dtype."""
    q = np.asarray(q)
    scale = np.asarray(scale)
    zero_point = np.asarray(zero_point)
    if q.dtype not in QUANT_DTYPES or zero_point.dtype != q.dtype:
        raise ValueError(f"input and zero_point must share an integer dtype, got {q.dtype} and {zero_point.dtype}")
    if scale.dtype not in REAL_DTYPES:
        raise ValueError(f"scale must be float32 or float16, got {scale.dtype}")
    p = _param_shape(q.shape, axes, scale, zero_point)
    d = q.astype(np.int64) - zero_point.astype(np.int64).reshape(p)
    # int64 -> float64 is exact here (|d| < 2^33); one rounding to the real type, then a product in that type.
    with np.errstate(over="ignore", invalid="ignore"):
        real = d.astype(np.float64).astype(scale.dtype)
        out = real * scale.reshape(p)
    assert out.dtype == scale.dtype
    return out
