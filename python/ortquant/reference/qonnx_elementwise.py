"""numpy reference of the QONNX elementwise ops BipolarQuant, Trunc (v1/v2) and FloatQuant.

Written from the spec (shared/specs/qonnx.md sections 2-4, decisions 6 and 7), independent of the C++.
Arithmetic is float32 where qonnx computes in float32 and float64 where numpy's type promotion makes qonnx
compute in float64 (Trunc v1 with an integer bit width; FloatQuant's clamp and final product).

Three quantities are computed here with exact math instead of numpy's float32 transcendental functions, which on
AVX-512 machines come from a SIMD library that is not correctly rounded (so qonnx's own results depend on the
machine there):

* powers of two with a non-integer exponent (non-integer bit widths): ``2.0 ** d`` in Python double precision
  rounded once to float32, which is what a correctly rounded ``powf`` gives;
* Trunc v2's ``round(log2(out_scale / scale))``: the exact nearest integer (ties cannot occur);
* FloatQuant's ``floor(log2(|v| + tiny))``: the exact binary exponent (decision 7).

float16 inputs (docs/ops.md, "float16"): float16 arrays are kept as they are and numpy's own float16 arithmetic
does each step in float16 (the float32 operation rounded to float16). A float16 scale selects that path and every
other float input must then be float16 too; with a float32 scale numpy promotes everything to float32, so the
other inputs may be float16 and are converted exactly. Powers of two in float16 are 2**d correctly rounded to
float32 and then to float16 (numpy's float16 power).
"""

from __future__ import annotations

import math

import numpy as np

from ortquant.reference.qonnx import float_arg, pow2_half, round_mode_fn

F32 = np.float32
F16 = np.float16
F64 = np.float64
TINY = F32(np.finfo(np.float32).tiny)
TINY16 = F16(np.finfo(np.float16).tiny)  # 2**-14


def _is_half(a: np.ndarray) -> bool:
    return np.asarray(a).dtype == F16


def _require_half(name: str, *arrays: np.ndarray) -> None:
    """With a float16 scale every other float input must be float16 too (ortquant's rule, docs/ops.md)."""
    if not all(_is_half(a) for a in arrays):
        raise ValueError(f"{name}: every float input must be float16 when scale is float16")


def _is_int(a: np.ndarray) -> bool:
    return np.asarray(a).dtype.kind in "iu"


def _pow2_scalar(d: float) -> float:
    """2**d in double precision (inf/0 outside the double range)."""
    if math.isnan(d):
        return math.nan
    if d == int(d):
        if d > 2000:
            return math.inf
        return math.ldexp(1.0, max(int(d), -2000))
    try:
        return 2.0**d
    except OverflowError:
        return math.inf


def pow2_f32(d: np.ndarray) -> np.ndarray:
    """2**d for float32 d, correctly rounded to float32 (elementwise)."""
    d = np.asarray(d, F32)
    with np.errstate(over="ignore"):
        return np.vectorize(lambda v: F32(_pow2_scalar(float(v))), otypes=[F32])(d).reshape(d.shape)


def pow2_f64(d: np.ndarray) -> np.ndarray:
    """2**d for float64 d (elementwise)."""
    d = np.asarray(d, F64)
    return np.vectorize(lambda v: _pow2_scalar(float(v)), otypes=[F64])(d).reshape(d.shape)


def bipolar_quant(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """BipolarQuant: (x >= 0 ? +1 : -1) * scale; -0 gives +1 and NaN gives -1. float16 when x and scale are
    (qonnx does not cast), float32 otherwise."""
    x, scale = float_arg(x), float_arg(scale)
    one = x.dtype.type(1)
    q = np.where(x >= x.dtype.type(0), one, -one).astype(x.dtype)
    y = q * scale
    return np.asarray(y, F16 if _is_half(x) and _is_half(scale) else F32)


def _check_bitwidth(b: np.ndarray, name: str) -> None:
    b = np.asarray(b)
    ok = (b > 0) if _is_int(b) else (np.isfinite(b) & (b > 0))
    if not np.all(ok):
        raise ValueError(f"{name} must be positive")


def int_bounds_array(signed: bool, narrow: bool, bitwidth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise qonnx min_int/max_int as float32 arrays (float32 formulas for a float32 bit width), or float16
    arrays from float16 arithmetic for a float16 bit width."""
    b = np.asarray(bitwidth)
    if _is_half(b):
        if signed:
            p16 = pow2_half(b - F16(1))
            return ((-p16 + F16(1)) if narrow else -p16).astype(F16), (p16 - F16(1)).astype(F16)
        p16 = pow2_half(b)
        return (F16(0) * b).astype(F16), ((p16 - F16(2)) if narrow else (p16 - F16(1))).astype(F16)
    if _is_int(b):
        bi = b.astype(np.int64)
        if signed:
            p = np.left_shift(np.int64(1), bi - 1)
            lo, hi = -p + (1 if narrow else 0), p - 1
        else:
            p = np.left_shift(np.int64(1), bi)
            lo, hi = np.zeros_like(p), p - (2 if narrow else 1)
        return lo.astype(F32), hi.astype(F32)
    bf = b.astype(F32)
    if signed:
        p = pow2_f32(bf - F32(1))
        return ((-p + F32(1)) if narrow else -p).astype(F32), (p - F32(1)).astype(F32)
    p = pow2_f32(bf)
    return (F32(0) * bf).astype(F32), ((p - F32(2)) if narrow else (p - F32(1))).astype(F32)


def trunc_v1(
    x: np.ndarray,
    scale: np.ndarray,
    zeropt: np.ndarray,
    in_bitwidth: np.ndarray,
    out_bitwidth: np.ndarray,
    rounding_mode: str = "FLOOR",
) -> np.ndarray:
    """Trunc v1: q = rne(x/scale + zeropt) / 2^(in - out), rounded, no clamp; y = (q - zeropt) * scale.

    An integer bit width makes numpy compute everything after the first rounding in float64; the result is
    rounded to float32 once at the end. A float16 scale: everything in float16, float16 result.
    """
    x, scale, zeropt = float_arg(x), float_arg(scale), float_arg(zeropt)
    in_b, out_b = np.asarray(in_bitwidth), np.asarray(out_bitwidth)
    _check_bitwidth(in_b, "in_bitwidth")
    _check_bitwidth(out_b, "out_bitwidth")
    rnd = round_mode_fn(rounding_mode)
    shape = np.broadcast_shapes(x.shape, scale.shape, zeropt.shape, in_b.shape, out_b.shape)
    if _is_half(scale):
        _require_half("Trunc", x, zeropt, in_b, out_b)
        with np.errstate(all="ignore"):
            q16 = np.round(x / scale + zeropt)
            t16 = pow2_half(in_b - out_b)
            y16 = (rnd(q16 / t16) - zeropt) * scale
        return np.broadcast_to(np.asarray(y16, F16), shape).copy()
    x, zeropt = x.astype(F32), zeropt.astype(F32)
    with np.errstate(all="ignore"):
        q = np.round(x / scale + zeropt).astype(F32)
        if _is_int(in_b) or _is_int(out_b):
            t = pow2_f64(in_b.astype(F64) - out_b.astype(F64))
            y = (rnd(q.astype(F64) / t) - zeropt.astype(F64)) * scale.astype(F64)
        else:
            if _is_half(in_b) and _is_half(out_b):  # float16 - float16 and 2.0 ** that stay float16
                t = pow2_half(in_b - out_b).astype(F32)
            else:
                t = pow2_f32(in_b.astype(F32) - out_b.astype(F32))
            y = (rnd((q / t).astype(F32)).astype(F32) - zeropt) * scale
    return np.broadcast_to(y.astype(F32), shape).copy()


def _pow2_nearest_scalar(r: float) -> float:
    if math.isnan(r) or r < 0:
        return math.nan
    if r == 0:
        return 0.0
    if math.isinf(r):
        return math.inf
    m, e = math.frexp(r)  # r = m * 2^e, m in [0.5, 1)
    m2 = 2.0 * m  # in [1, 2); log2(r) = e - 1 + log2(m2)
    k = e - 1 + (1 if m2 * m2 > 2.0 else 0)
    return math.ldexp(1.0, k) if k < 1024 else math.inf


def trunc_scale_v2(out_scale: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """2^round(log2(out_scale / scale)) with the ratio in float32 and the exponent rounded exactly; all in float16
    (ratio and power of two rounded to float16: 2^16 and above are inf) when both inputs are float16."""
    if _is_half(out_scale) and _is_half(scale):
        with np.errstate(all="ignore"):
            r16 = np.asarray(out_scale / scale, F16)
            with np.errstate(over="ignore"):
                pw = np.vectorize(lambda v: F16(F32(_pow2_nearest_scalar(float(v)))), otypes=[F16])(r16)
            return pw.reshape(r16.shape)
    with np.errstate(all="ignore"):
        r = (np.asarray(out_scale, F32) / np.asarray(scale, F32)).astype(F32)
        return np.vectorize(lambda v: F32(_pow2_nearest_scalar(float(v))), otypes=[F32])(r).reshape(r.shape)


def trunc_v2(
    x: np.ndarray,
    scale: np.ndarray,
    zeropt: np.ndarray,
    in_bitwidth: np.ndarray,
    out_scale: np.ndarray,
    out_bitwidth: np.ndarray,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "FLOOR",
) -> np.ndarray:
    """Trunc v2: t = 2^round(log2(out_scale/scale)); q = clamp(rne(x/scale + zeropt) / t), rounded;
    y = (q - zeropt/t) * out_scale. in_bitwidth is not used (not even for the output shape).
    A float16 scale: everything in float16 (out_bitwidth may be of any type), float16 result."""
    x, scale, zeropt, out_scale = (float_arg(a) for a in (x, scale, zeropt, out_scale))
    out_b = np.asarray(out_bitwidth)
    _check_bitwidth(out_b, "out_bitwidth")
    rnd = round_mode_fn(rounding_mode)
    shape = np.broadcast_shapes(x.shape, scale.shape, zeropt.shape, out_scale.shape, out_b.shape)
    lo, hi = int_bounds_array(signed, narrow, out_b)
    if _is_half(scale):
        _require_half("Trunc", x, zeropt, out_scale)
        t16 = trunc_scale_v2(out_scale, scale)
        with np.errstate(all="ignore"):
            q16 = np.round(x / scale + zeropt) / t16
            # compared exactly, assigned cast to float16 (qonnx's max_int.astype(y.dtype))
            q16 = np.where(q16 > hi, hi.astype(F16), q16)
            q16 = np.where(q16 < lo, lo.astype(F16), q16)
            y16 = (rnd(q16) - zeropt / t16) * out_scale
        return np.broadcast_to(np.asarray(y16, F16), shape).copy()
    x, zeropt, out_scale = x.astype(F32), zeropt.astype(F32), out_scale.astype(F32)
    t = trunc_scale_v2(out_scale, scale)
    lo, hi = lo.astype(F32), hi.astype(F32)
    with np.errstate(all="ignore"):
        q = np.round(x / scale + zeropt).astype(F32)
        q = (q / t).astype(F32)
        q = np.where(q > hi, hi, q)
        q = np.where(q < lo, lo, q)
        q = rnd(q).astype(F32)
        y = (q - (zeropt / t).astype(F32)) * out_scale
    return np.broadcast_to(y.astype(F32), shape).copy()


def float_formula_max(exponent_bitwidth: int, mantissa_bitwidth: int, exponent_bias: int) -> float:
    """(2 - 2^-M) * 2^(2^E - 1 - B): the exponent in float32, 2^exponent in float32, the product in float64."""
    max_exp = (F32(2) ** F32(exponent_bitwidth) - F32(1)) - F32(exponent_bias)
    p = F32(_pow2_scalar(float(max_exp))) if np.isfinite(max_exp) else F32(np.inf)
    return (2.0 - math.ldexp(1.0, -mantissa_bitwidth)) * float(p)


def float_formula_max_half(exponent_bitwidth: int, mantissa_bitwidth: int, exponent_bias: int) -> float:
    """The formula max for float16 E and B: 2.0**E - 1.0 - B and 2**that in float16 arithmetic (inf from 2**16),
    the mantissa sum and the product in float64."""
    with np.errstate(over="ignore"):
        e2 = pow2_half(F16(exponent_bitwidth))[()]
        max_exp = (e2 - F16(1)) - F16(exponent_bias)
        p = pow2_half(max_exp)[()]
    return (2.0 - math.ldexp(1.0, -mantissa_bitwidth)) * float(p)


def _format_int(a: np.ndarray, name: str) -> int:
    a = np.asarray(a)
    if a.size != 1:
        raise ValueError(f"{name} must have one element")
    v = float(a.reshape(()))
    if not math.isfinite(v) or v != math.floor(v):
        raise ValueError(f"{name} must be an integer")
    return int(v)


def float_quant(
    x: np.ndarray,
    scale: np.ndarray,
    exponent_bitwidth: np.ndarray,
    mantissa_bitwidth: np.ndarray,
    exponent_bias: np.ndarray,
    max_val: np.ndarray,
    rounding_mode: str = "ROUND",
    has_inf: bool = False,
    has_nan: bool = False,
    saturation: bool = True,
) -> np.ndarray:
    """FloatQuant with the exact exponent (decision 7); everything else as the spec's step list.

    A float16 scale (every input float16 then): the steps up to q in float16 (tiny = 2**-14, 2**e in float16),
    the formula max in float16 arithmetic; the clip and the product with the scale as before; float32 result.
    """
    e_bits = _format_int(exponent_bitwidth, "exponent_bitwidth")
    m_bits = _format_int(mantissa_bitwidth, "mantissa_bitwidth")
    bias = _format_int(exponent_bias, "exponent_bias")
    if not saturation and not has_inf and not has_nan:
        raise ValueError("saturation=0 needs has_inf or has_nan")
    x, scale, max_val = (float_arg(a) for a in (x, scale, max_val))
    half = _is_half(scale)
    if half:
        _require_half("FloatQuant", x, exponent_bitwidth, mantissa_bitwidth, exponent_bias, max_val)
    formula16 = _is_half(exponent_bitwidth) and _is_half(exponent_bias)
    with np.errstate(over="ignore"):
        formula = (float_formula_max_half if formula16 else float_formula_max)(e_bits, m_bits, bias)
    rnd = round_mode_fn(rounding_mode)
    with np.errstate(all="ignore"):
        if half:
            v = x / scale
            a = np.abs(v) + TINY16
        else:
            x = x.astype(F32)
            v = (x / scale).astype(F32)
            a = (np.abs(v) + TINY).astype(F32)
        finite = np.isfinite(a)
        _, ex = np.frexp(np.where(finite, a, a.dtype.type(1)))  # a = m * 2^ex, m in [0.5, 1): floor(log2 a) = ex - 1
        e = np.maximum(ex.astype(np.int64) - 1 - m_bits, 1 - bias - m_bits)
        e = np.clip(e, -300, 300)
        if half:  # 2**e in float16: 0 from 2**-25 down (a tie to even), inf from 2**16 up
            s16 = np.ldexp(1.0, e).astype(F16)
            s = np.where(finite, s16, F16(np.inf)).astype(F16)
            q = s * rnd(v / s)
        else:
            s = np.where(finite, np.ldexp(F32(1), e.astype(np.int32)).astype(F32), F32(np.inf)).astype(F32)
            q = (s * rnd((v / s).astype(F32)).astype(F32)).astype(F32)
        maxv = np.minimum(F64(formula), max_val.astype(F64))
        q64 = q.astype(F64)
        over = q64 > maxv
        under = q64 < -maxv
        is_inf = np.isinf(q64)
        c = np.clip(q64, -maxv, maxv)
        if not saturation:
            c = np.array(c, F64)
            if has_inf:
                c = np.where(over, np.inf, c)
                c = np.where(under, -np.inf, c)
            else:
                c = np.where(over | under | is_inf, np.nan, c)
        y = (c * scale.astype(F64)).astype(F32)
    shape = np.broadcast_shapes(
        x.shape,
        scale.shape,
        np.shape(exponent_bitwidth),
        np.shape(mantissa_bitwidth),
        np.shape(exponent_bias),
        max_val.shape,
    )
    return np.broadcast_to(y, shape).copy()
