#include "core/qonnx/wide_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/qonnx/params.h"
#include "core/qonnx/trunc.h"
#include "core/qonnx/wide_quant_kernels.h"

namespace ortquant::qonnx {

IntQuantBounds64 int_quant_bounds_f64(bool is_signed, bool narrow, double bw) {
  if (!std::isfinite(bw) || !(bw > 0.0)) throw_error("bitwidth must be finite and positive, got ", bw);
  IntQuantBounds64 b;
  if (is_signed && bw == 1.0) {
    b.bipolar = true;
    return b;
  }
  // The float64 expressions of qonnx's min_int/max_int (numpy float64 power is the C library's pow).
  if (is_signed) {
    const double p = std::pow(2.0, bw - 1.0);
    b.lo = narrow ? -p + 1.0 : -p;
    b.hi = p - 1.0;
  } else {
    const double p = std::pow(2.0, bw);
    b.lo = 0.0 * bw;
    b.hi = narrow ? p - 2.0 : p - 1.0;
  }
  return b;
}

IntQuantBounds64 int_quant_bounds_i64(bool is_signed, bool narrow, int64_t bw) {
  if (bw <= 0) throw_error("bitwidth must be positive, got ", bw);
  if (bw > 62) throw_error("bitwidth must be at most 62 for an int64 bitwidth, got ", bw);
  IntQuantBounds64 b;
  if (is_signed && bw == 1) {
    b.bipolar = true;
    return b;
  }
  const int64_t one = 1;
  // numpy compares a float with an int64 bound by converting the bound to float64 (nearest).
  if (is_signed) {
    const int64_t p = one << (bw - 1);
    b.lo = static_cast<double>(narrow ? -p + 1 : -p);
    b.hi = static_cast<double>(p - 1);
  } else {
    const int64_t p = one << bw;
    b.lo = 0.0;
    b.hi = static_cast<double>(narrow ? p - 2 : p - 1);
  }
  return b;
}

IntQuantBounds64 widen(const IntQuantBounds& b) { return {b.lo, b.hi, b.bipolar}; }

IntQuantBounds narrow_to_f32(const IntQuantBounds64& b) {
  IntQuantBounds out;
  out.lo = static_cast<float>(b.lo);
  out.hi = static_cast<float>(b.hi);
  out.bipolar = b.bipolar;
  return out;
}

namespace {

// The wide loops (float64 / integer operands, rare in exported models) are compiled for the modes models use
// (ROUND; FLOOR for Trunc) and once more for every other mode, which they then take at run time (kRunTimeMode:
// round_value(mode, v)): one instantiation per mode made this file the slowest of the library to compile.
constexpr RoundMode kRunTimeMode = static_cast<RoundMode>(255);

template <RoundMode M, class T>
inline T round_as(RoundMode mode, T v) {
  if constexpr (M == kRunTimeMode) return round_value(mode, v);
  else return round_value<M>(v);
}

// One contiguous float32 row of X with its scale and zero point constant along the row (the per-tensor and
// per-channel cases of exported models): the operands' loads and dtype tests are hoisted out of the loop. Same steps
// and bits as the general loop below. ROUND (the mode models use) within 2^51 takes the per-ISA loop of
// wide_quant_impl.inc, vectorized, with a power-of-two scale's division as a multiplication.
template <RoundMode M, bool kDivF32>
void int_quant_wide_row(const float* x, int64_t n, double sv, double zv, const IntQuantBounds64& b, RoundMode mode,
                        float* y) {
  const float sf = static_cast<float>(sv);
  const double lo = b.lo, hi = b.hi;
  for (int64_t i = 0; i < n; ++i) {
    double d;
    if constexpr (kDivF32) d = static_cast<double>(x[i] / sf);
    else d = static_cast<double>(x[i]) / sv;
    d = d + zv;
    d = d > hi ? hi : d;
    d = d < lo ? lo : d;
    const double q = round_as<M>(mode, d);
    y[i] = static_cast<float>((q - zv) * sv);
  }
}

template <RoundMode M>
void int_quant_wide_row_any(const float* x, int64_t n, double sv, double zv, bool div_f32, bool magic,
                            const IntQuantBounds64& b, RoundMode mode, float* y) {
  if (M == RoundMode::kHalfEven && magic) {
    const auto row = select_isa(&scalar::int_quant_wide_round_row, &avx2::int_quant_wide_round_row,
                                &avx512::int_quant_wide_round_row);
    row(x, n, sv, zv, b.lo, b.hi, div_f32, y);
    return;
  }
  div_f32 ? int_quant_wide_row<M, true>(x, n, sv, zv, b, mode, y)
          : int_quant_wide_row<M, false>(x, n, sv, zv, b, mode, y);
}

template <RoundMode M>
void int_quant_wide_impl(const BroadcastPlan& plan, WideOperand x, WideOperand s, WideOperand z, float* y,
                         int64_t begin, int64_t end, const IntQuantBounds64& b, RoundMode mode) {
  const bool div_f32 = !x.f64 && !s.f64;
  // The magic-number rounding holds while every clamped value is within 2^51 in magnitude (bit widths to 51).
  constexpr double kSmall = 2251799813685248.0;  // 2^51
  const bool magic = std::fabs(b.lo) <= kSmall && std::fabs(b.hi) <= kSmall;
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (!b.bipolar && !x.f64 && st[0] == 1 && st[1] == 0 && st[2] == 0) {
      int_quant_wide_row_any<M>(static_cast<const float*>(x.data) + offs[0], n, s.at(offs[1]), z.at(offs[2]),
                                div_f32, magic, b, mode, y + o);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double xv = x.at(offs[0] + i * st[0]);
      const double sv = s.at(offs[1] + i * st[1]);
      const double zv = z.at(offs[2] + i * st[2]);
      double d = div_f32 ? static_cast<double>(static_cast<float>(xv) / static_cast<float>(sv)) : xv / sv;
      d = d + zv;
      double q;
      if (b.bipolar) {
        q = d >= 0.0 ? 1.0 : -1.0;
      } else {
        if (d > b.hi) d = b.hi;
        if (d < b.lo) d = b.lo;
        q = round_as<M>(mode, d);
      }
      y[o + i] = static_cast<float>((q - zv) * sv);
    }
  });
}

}  // namespace

void int_quant_wide(const BroadcastPlan& plan, WideOperand x, WideOperand s, WideOperand z, float* y, int64_t begin,
                    int64_t end, const IntQuantBounds64& b, RoundMode mode) {
  if (mode == RoundMode::kHalfEven) int_quant_wide_impl<RoundMode::kHalfEven>(plan, x, s, z, y, begin, end, b, mode);
  else int_quant_wide_impl<kRunTimeMode>(plan, x, s, z, y, begin, end, b, mode);
}

void bipolar_quant_wide(const BroadcastPlan& plan, WideOperand x, WideOperand s, float* y, int64_t begin,
                        int64_t end) {
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const double xv = x.at(offs[0] + i * st[0]);
      const double sv = s.at(offs[1] + i * st[1]);
      y[o + i] = static_cast<float>((xv >= 0.0 ? 1.0 : -1.0) * sv);
    }
  });
}

void thresholds_to_f32(const double* t, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = t[i];
    float f = static_cast<float>(v);  // nearest (NaN stays NaN, beyond FLT_MAX gives inf)
    if (static_cast<double>(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    out[i] = f;
  }
}

void thresholds_i64_to_f32(const int64_t* t, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(t[i]);
    thresholds_to_f32(&v, out + i, 1);
  }
}

namespace {

// One numpy step in float32 (f32 = true: the float32 operation, exact via double for + - * /) or float64.
inline double step(bool f32, double v) { return f32 ? static_cast<double>(static_cast<float>(v)) : v; }

// The exact nearest power of two to a float64 ratio: 2^round(log2(r)); NaN for negative/NaN, 0 for 0, inf for inf.
double power_of_two_f64(double r) {
  if (std::isnan(r) || r < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (r == 0.0) return 0.0;
  if (std::isinf(r)) return r;
  int e = 0;
  const double m = std::frexp(r, &e) * 2.0;  // r = m * 2^(e-1), m in [1, 2)
  // log2(r) = e - 1 + log2(m); round up when m > sqrt(2). No double lies strictly between sqrt(2) and its
  // rounding 1.4142135623730951 (which is above sqrt(2)), so m > sqrt(2) <=> m >= that double.
  const int k = (e - 1) + (m >= 1.4142135623730951 ? 1 : 0);
  return std::ldexp(1.0, k);
}

// qonnx's min_int/max_int (no 1-bit special case in Trunc) for one bit width element of any kind.
void trunc_bounds(const WideTensor& bw, int64_t i, bool is_signed, bool narrow, double* lo, double* hi) {
  if (bw.is_int()) {
    const int64_t b = bw.i64(i);
    if (b <= 0 || b > 62) throw_error("out_bitwidth must be in [1, 62] for an integer bit width, got ", b);
    const int64_t p = int64_t{1} << (is_signed ? b - 1 : b);
    *lo = is_signed ? static_cast<double>(narrow ? -p + 1 : -p) : 0.0;
    *hi = static_cast<double>(is_signed ? p - 1 : (narrow ? p - 2 : p - 1));
    return;
  }
  const double b = bw.at(i);
  if (!std::isfinite(b) || !(b > 0.0)) throw_error("out_bitwidth must be finite and positive, got ", b);
  const bool f32 = bw.kind == WideTensor::kF32;
  const double p = f32 ? static_cast<double>(std::pow(2.0f, static_cast<float>(is_signed ? b - 1.0 : b)))
                       : std::pow(2.0, is_signed ? b - 1.0 : b);
  if (is_signed) {
    *lo = step(f32, narrow ? -p + 1.0 : -p);
    *hi = step(f32, p - 1.0);
  } else {
    *lo = 0.0;
    *hi = step(f32, narrow ? p - 2.0 : p - 1.0);
  }
}

template <RoundMode M>
double round_in(RoundMode mode, bool f32, double v) {
  return f32 ? static_cast<double>(round_as<M>(mode, static_cast<float>(v))) : round_as<M>(mode, v);
}

template <RoundMode M>
void trunc_wide_impl(const WideTensor& x, const WideTensor& s, const WideTensor& z, const WideTensor& in_bw,
                     const WideTensor& in4, const WideTensor* out_bw, bool is_signed, bool narrow, const Shape& out,
                     float* y, RoundMode mode) {
  std::vector<Shape> shapes = {x.shape, s.shape, z.shape, in_bw.shape, in4.shape};
  if (out_bw) shapes.push_back(out_bw->shape);
  const bool p1 = !(x.f64() || s.f64());  // true: the step is float32
  const bool p2 = p1 && !z.f64();
  for_each_broadcast(out, shapes, [&](int64_t o, const int64_t* idx) {
    const double xv = x.at(idx[0]), sv = s.at(idx[1]), zv = z.at(idx[2]);
    double d = step(p1, xv / sv);
    d = step(p2, d + zv);
    d = std::nearbyint(d);  // np.round: half to even, exact in either precision
    double r;
    if (out_bw) {  // v2
      const double os = in4.at(idx[4]);
      const bool pr = !(in4.f64() || s.f64());
      const double t = pr ? static_cast<double>(trunc_power_of_two(static_cast<float>(os) / static_cast<float>(sv)))
                          : power_of_two_f64(os / sv);
      const bool p3 = p2 && pr;
      d = step(p3, d / t);
      double lo = 0.0, hi = 0.0;
      trunc_bounds(*out_bw, idx[5], is_signed, narrow, &lo, &hi);
      if (d > hi) d = step(p3, hi);
      if (d < lo) d = step(p3, lo);
      const double q = round_in<M>(mode, p3, d);
      const bool pz = !z.f64() && pr;
      const double oz = step(pz, zv / t);
      const bool p4 = p3 && pz;
      r = step(p4, q - oz);
      r = step(p4 && !in4.f64(), r * os);
    } else {  // v1: 2 ** (in_bitwidth - out_bitwidth)
      const WideTensor& ob = in4;
      double ts;
      bool pb;  // true: float32
      if (in_bw.is_int() && ob.is_int()) {
        const int64_t ib = in_bw.i64(idx[3]), obv = ob.i64(idx[4]);
        if (ib <= 0 || obv <= 0) throw_error("bit widths must be positive, got ", ib, " and ", obv);
        ts = std::pow(2.0, static_cast<double>(ib - obv));  // 2.0 ** int array: float64
        pb = false;
      } else {
        pb = in_bw.kind == WideTensor::kF32 && ob.kind == WideTensor::kF32;
        const double ib = in_bw.at(idx[3]), obv = ob.at(idx[4]);
        if (!std::isfinite(ib) || !(ib > 0.0) || !std::isfinite(obv) || !(obv > 0.0))
          throw_error("bit widths must be finite and positive, got ", ib, " and ", obv);
        ts = pb ? static_cast<double>(std::pow(2.0f, static_cast<float>(ib) - static_cast<float>(obv)))
                : std::pow(2.0, ib - obv);
      }
      const bool p3 = p2 && pb;
      d = step(p3, d / ts);
      const double q = round_in<M>(mode, p3, d);
      const bool p4 = p3 && !z.f64();
      r = step(p4, q - zv);
      r = step(p4 && !s.f64(), r * sv);
    }
    y[o] = static_cast<float>(r);
  });
}

}  // namespace

void trunc_wide(const WideTensor& x, const WideTensor& s, const WideTensor& z, const WideTensor& in_bw,
                const WideTensor& in4, const WideTensor* out_bw, bool is_signed, bool narrow, RoundMode mode,
                const Shape& out, float* y) {
  if (mode == RoundMode::kFloor)
    trunc_wide_impl<RoundMode::kFloor>(x, s, z, in_bw, in4, out_bw, is_signed, narrow, out, y, mode);
  else if (mode == RoundMode::kHalfEven)
    trunc_wide_impl<RoundMode::kHalfEven>(x, s, z, in_bw, in4, out_bw, is_signed, narrow, out, y, mode);
  else
    trunc_wide_impl<kRunTimeMode>(x, s, z, in_bw, in4, out_bw, is_signed, narrow, out, y, mode);
}

// ---- FloatQuant ------------------------------------------------------------------------------------------------

namespace {

// One integer-valued element of a FloatQuant format parameter (same rule and message as the float32 path).
int32_t float_format_param(const WideTensor& t, const char* what, int32_t lo, int32_t hi) {
  if (shape_size(t.shape) != 1)
    throw_error("input ", what, " must have exactly one element, got shape ", shape_str(t.shape));
  if (t.is_int()) {
    const int64_t v = t.i64(0);
    if (v < lo || v > hi) throw_error("input ", what, " must be an integer in [", lo, ", ", hi, "], got ", v);
    return static_cast<int32_t>(v);
  }
  const double v = t.at(0);
  if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi)
    throw_error("input ", what, " must be an integer in [", lo, ", ", hi, "], got ", v);
  return static_cast<int32_t>(v);
}

// q = s * round(v / s) of one element: v = X / scale and |v| + tiny in T1 (float or double), the grid in T5.
// Returns NaN for a non-finite |v| + tiny (numpy: log2 gives inf/NaN, s = inf/NaN, v / s = NaN).
template <RoundMode R, class T1, class T5>
double float_quant_step(double xv, double sv, int32_t mant, int32_t emin, RoundMode mode) {
  const T1 v = static_cast<T1>(xv) / static_cast<T1>(sv);  // float: both are float32 values, converted exactly
  const T1 a = std::fabs(v) + std::numeric_limits<T1>::min();  // finfo(d1).tiny
  if (!std::isfinite(a)) return std::numeric_limits<double>::quiet_NaN();
  int32_t e = static_cast<int32_t>(std::ilogb(a)) - mant;  // a is normal: its exact binary exponent
  if (e < emin) e = emin;
  const T5 st = std::ldexp(T5(1), e);  // exp2 of an integer: exact, 0 / inf beyond the range
  const T5 r = round_as<R>(mode, static_cast<T5>(v) / st);
  return static_cast<double>(st * r);
}

template <RoundMode R, class T1, class T5, FloatOverflow O>
void float_quant_wide_impl(const BroadcastPlan& plan, const WideTensor& x, const WideTensor& s,
                           const WideTensor& mvt, const FloatQuantWideFormat& f, float* y, int64_t begin,
                           int64_t end, RoundMode mode) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  const bool one_bound = shape_size(mvt.shape) == 1;  // numpy's two clip loops differ in the sign of zeros
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const double xv = x.at(offs[0] + i * st[0]);
      const double sv = s.at(offs[1] + i * st[1]);
      const double mv = mvt.at(offs[2] + i * st[2]);  // an int64 max_val rounded to float64, as numpy does
      const double q = float_quant_step<R, T1, T5>(xv, sv, f.mantissa, f.emin, mode);
      // np.minimum(formula, max_val): NaN propagates, max_val on a tie (signed zeros)
      const double hi = std::isnan(mv) ? kNan : (f.formula < mv ? f.formula : mv);
      const double lo = -hi;
      double c;
      if (std::isnan(hi)) {
        c = kNan;  // np.clip with a NaN bound gives NaN everywhere
      } else if (one_bound) {
        // np.clip with one-element bounds: max(lo, q), then min(hi, .), each returning its second operand unless
        // the first is strictly beyond (so a zero q keeps its sign); NaN q stays NaN.
        c = lo > q ? lo : q;
        c = hi < c ? hi : c;
      } else {
        // np.clip with bounds of several elements: max(q, lo), then min(., hi), each returning the bound on a tie
        // (so with maxv = +-0 every q but NaN becomes maxv); NaN q stays NaN.
        c = (std::isnan(q) || q > lo) ? q : lo;
        c = (std::isnan(c) || c < hi) ? c : hi;
      }
      // Either way a negative max_val (-maxv > maxv) turns every q but NaN into maxv.
      if constexpr (O == FloatOverflow::kInf) {
        if (q > hi) c = kInf;
        if (q < lo) c = -kInf;
      } else if constexpr (O == FloatOverflow::kNan) {
        if (q > hi || q < lo || std::isinf(q)) c = kNan;
      }
      y[o + i] = static_cast<float>(c * sv);
    }
  });
}

template <RoundMode R, class T1, class T5>
void float_quant_wide_overflow(const BroadcastPlan& plan, const WideTensor& x, const WideTensor& s,
                               const WideTensor& mv, const FloatQuantWideFormat& f, float* y, int64_t begin,
                               int64_t end, RoundMode mode, FloatOverflow overflow) {
  switch (overflow) {
    case FloatOverflow::kSaturate:
      return float_quant_wide_impl<R, T1, T5, FloatOverflow::kSaturate>(plan, x, s, mv, f, y, begin, end, mode);
    case FloatOverflow::kInf:
      return float_quant_wide_impl<R, T1, T5, FloatOverflow::kInf>(plan, x, s, mv, f, y, begin, end, mode);
    case FloatOverflow::kNan:
      return float_quant_wide_impl<R, T1, T5, FloatOverflow::kNan>(plan, x, s, mv, f, y, begin, end, mode);
  }
}

}  // namespace

FloatQuantWideFormat float_quant_wide_format(const WideTensor& e_bits, const WideTensor& m_bits,
                                             const WideTensor& bias) {
  const int32_t E = float_format_param(e_bits, "exponent_bitwidth", 0, 64);
  const int32_t M = float_format_param(m_bits, "mantissa_bitwidth", 0, 52);
  const int32_t B = float_format_param(bias, "exponent_bias", -(1 << 24), 1 << 24);
  FloatQuantWideFormat f;
  f.mantissa = M;
  f.emin = static_cast<int32_t>(std::clamp<int64_t>(int64_t{1} - B - M, -1100, 1100));
  f.grid_f32 = m_bits.kind == WideTensor::kF32 && bias.kind == WideTensor::kF32;
  // max_exponent = (2.0 ** E) - 1.0 - B: 2.0 ** E is exact in either dtype (E <= 64); "- 1.0" runs in E's dtype
  // (an integer E gives float64); "- B" and 2 ** max_exponent in float32 only when E and B both are float32.
  // Each float32 step computed in double and rounded once is the float32 operation (2p + 2 <= 53).
  const bool e_f32 = e_bits.kind == WideTensor::kF32;
  const bool me_f32 = e_f32 && bias.kind == WideTensor::kF32;
  double t = std::ldexp(1.0, E) - 1.0;
  if (e_f32) t = static_cast<double>(static_cast<float>(t));
  t = t - static_cast<double>(B);
  const double p = me_f32 ? static_cast<double>(std::pow(2.0f, static_cast<float>(t))) : std::pow(2.0, t);
  // max_mantissa = sum(2.0 ** arange(0, -M - 1, -1)) is float64 for every dtype of M: 2 - 2^-M exactly.
  f.formula = (2.0 - std::ldexp(1.0, -M)) * p;
  return f;
}

void float_quant_wide(const BroadcastPlan& plan, const WideTensor& x, const WideTensor& s, const WideTensor& max_val,
                      const FloatQuantWideFormat& f, float* y, int64_t begin, int64_t end, RoundMode mode,
                      FloatOverflow overflow) {
  const bool v_f32 = x.kind == WideTensor::kF32 && s.kind == WideTensor::kF32;
  auto go = [&](auto r) {
    constexpr RoundMode R = decltype(r)::value;
    if (v_f32 && f.grid_f32)
      float_quant_wide_overflow<R, float, float>(plan, x, s, max_val, f, y, begin, end, mode, overflow);
    else if (v_f32)
      float_quant_wide_overflow<R, float, double>(plan, x, s, max_val, f, y, begin, end, mode, overflow);
    else
      float_quant_wide_overflow<R, double, double>(plan, x, s, max_val, f, y, begin, end, mode, overflow);
  };
  if (mode == RoundMode::kHalfEven) go(std::integral_constant<RoundMode, RoundMode::kHalfEven>{});
  else go(std::integral_constant<RoundMode, kRunTimeMode>{});
}

}  // namespace ortquant::qonnx
