#include "core/qonnx/wide_params.h"

#include <cmath>
#include <limits>

#include "core/error.h"

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

template <RoundMode M>
void int_quant_wide_impl(const BroadcastPlan& plan, WideOperand x, WideOperand s, WideOperand z, float* y,
                         int64_t begin, int64_t end, const IntQuantBounds64& b) {
  const bool div_f32 = !x.f64 && !s.f64;
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
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
        q = round_value<M>(d);
      }
      y[o + i] = static_cast<float>((q - zv) * sv);
    }
  });
}

}  // namespace

void int_quant_wide(const BroadcastPlan& plan, WideOperand x, WideOperand s, WideOperand z, float* y, int64_t begin,
                    int64_t end, const IntQuantBounds64& b, RoundMode mode) {
  dispatch_round_mode(mode, [&](auto m) { int_quant_wide_impl<decltype(m)::value>(plan, x, s, z, y, begin, end, b); });
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

}  // namespace ortquant::qonnx
