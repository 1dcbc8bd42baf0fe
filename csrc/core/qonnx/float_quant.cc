#include "core/qonnx/float_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/half.h"
#include "core/qonnx/float_quant_kernels.h"

namespace ortquant::qonnx {
namespace {

// One integer-valued element of a format parameter (exponent_bitwidth, mantissa_bitwidth, exponent_bias).
int32_t format_param(const NumTensor& t, const char* what, int32_t lo, int32_t hi) {
  if (t.size() != 1) throw_error("input ", what, " must have exactly one element, got shape ", shape_str(t.shape));
  const double v = t.f64(0);
  if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi)
    throw_error("input ", what, " must be an integer in [", lo, ", ", hi, "], got ", v);
  return static_cast<int32_t>(v);
}

void require_half(const NumTensor& t, const char* what) {
  if (!t.is_f16)
    throw_error("input ", what, " must be float16 when scale is float16 (numpy would leave float16 there), got ",
                t.is_int32 ? "int32" : "float32");
}

FloatQuantRow row_at(const FloatQuantParams& p, int64_t off) {
  return {p.scale.data() + off, p.hi.data() + off, p.y_hi.data() + off, p.y_lo.data() + off};
}

// np.clip with bounds of several elements (FloatQuantParams::zero_bound): where maxv is +-0, every q but NaN
// becomes maxv, whose output is y_hi. The loops gave q * scale for a zero q (the one-element rule) and y_hi / y_lo
// beyond the bounds. Saturating: every output that is not NaN becomes y_hi (a NaN one has q NaN, or y_hi is NaN
// too). has_inf / has_nan: values beyond stay +-inf / NaN; only a zero q (output +-0 * scale, the only zero
// outputs there) becomes y_hi.
void patch_zero_bounds(const BroadcastPlan& plan, const FloatQuantParams& p, float* y, int64_t begin, int64_t end,
                       FloatOverflow overflow) {
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(offs[1] + i * st[1]);
      if (!p.zero_bound[k]) continue;
      float& out = y[o + i];
      const bool patch = overflow == FloatOverflow::kSaturate ? !std::isnan(out) : out == 0.0f;
      if (patch) out = p.y_hi[k];
    }
  });
}

}  // namespace

FloatOverflow float_quant_overflow(bool saturation, bool has_inf, bool has_nan) {
  if (saturation) return FloatOverflow::kSaturate;
  if (has_inf) return FloatOverflow::kInf;
  if (has_nan) return FloatOverflow::kNan;
  throw_error("attribute 'saturation' is 0 but neither 'has_inf' nor 'has_nan' is set: out-of-range values would "
              "have no representation");
}

double float_quant_formula_max(int32_t e_bits, int32_t m_bits, int32_t bias) {
  // numpy: max_exponent = (2.0**E) - 1.0 - B in float32; 2**max_exponent in float32 (inf beyond 2^127);
  // max mantissa = sum of 2^-i for i = 0..M in float64 = 2 - 2^-M (exact for M <= 52); their float64 product.
  const float max_exp = (std::pow(2.0f, static_cast<float>(e_bits)) - 1.0f) - static_cast<float>(bias);
  const float p = std::pow(2.0f, max_exp);
  const double mant = 2.0 - std::ldexp(1.0, -m_bits);
  return mant * static_cast<double>(p);
}

double float_quant_formula_max_half(int32_t e_bits, int32_t m_bits, int32_t bias) {
  // numpy on float16 E and B: 2.0 ** E, - 1.0, - B and 2 ** max_exponent are float16 operations; the mantissa
  // sum is float64 as before, and so is the product.
  const float e2 = round_to_half(std::pow(2.0f, static_cast<float>(e_bits)));
  const float max_exp = round_to_half(round_to_half(e2 - 1.0f) - static_cast<float>(bias));
  const float p = round_to_half(std::pow(2.0f, max_exp));
  const double mant = 2.0 - std::ldexp(1.0, -m_bits);
  return mant * static_cast<double>(p);
}

FloatQuantParams float_quant_params(const NumTensor& scale, const NumTensor& e_bits, const NumTensor& m_bits,
                                    const NumTensor& bias, const NumTensor& max_val) {
  if (scale.is_f16) {
    require_half(e_bits, "exponent_bitwidth");
    require_half(m_bits, "mantissa_bitwidth");
    require_half(bias, "exponent_bias");
    require_half(max_val, "max_val");
  }
  const int32_t E = format_param(e_bits, "exponent_bitwidth", 0, 64);
  const int32_t M = format_param(m_bits, "mantissa_bitwidth", 0, 52);
  const int32_t B = format_param(bias, "exponent_bias", -(1 << 24), 1 << 24);
  FloatQuantParams p;
  p.half = scale.is_f16;
  p.shape = broadcast_shapes({scale.shape, e_bits.shape, m_bits.shape, bias.shape, max_val.shape});
  p.mantissa = M;
  // e below -190 gives s = 0 like 2^-190 (anything below 2^-150 rounds to 0); above 127, s = inf. With float16 B
  // and M, numpy's 1 - B - M is rounded to float16, which changes it only beyond +-2048, where 2^e is 0 or inf
  // in float32 and in float16 alike.
  p.emin = static_cast<int32_t>(std::clamp<int64_t>(int64_t{1} - B - M, -190, 128));
  const double formula =
      e_bits.is_f16 && bias.is_f16 ? float_quant_formula_max_half(E, M, B) : float_quant_formula_max(E, M, B);
  const auto n = static_cast<size_t>(shape_size(p.shape));
  for (auto* v : {&p.scale, &p.hi, &p.y_hi, &p.y_lo}) v->resize(n);
  const bool several_bounds = max_val.size() > 1;
  for_each_broadcast(p.shape, {scale.shape, max_val.shape}, [&](int64_t o, const int64_t* idx) {
    const float sc = scale.f32(idx[0]);
    const float mv = max_val.f32(idx[1]);
    // np.minimum(formula, max_val) in float64; NaN propagates and then np.clip makes every output NaN, which a
    // NaN scale reproduces (v = x / NaN = NaN).
    if (std::isnan(mv)) {
      p.scale[o] = std::numeric_limits<float>::quiet_NaN();
      p.hi[o] = p.y_hi[o] = p.y_lo[o] = std::numeric_limits<float>::quiet_NaN();
      return;
    }
    // np.minimum returns its second operand on a tie: a formula max of +0 (2^(2^E - 1 - B) underflows) with
    // max_val = -0.0 gives -0.0, which decides the sign of clipped zeros.
    const double maxv = formula < static_cast<double>(mv) ? formula : static_cast<double>(mv);
    // Largest float32 <= maxv: for float32 q, q > maxv iff q > hi, and q < -maxv iff q < -hi.
    float hi = static_cast<float>(maxv);
    if (static_cast<double>(hi) > maxv) hi = std::nextafter(hi, -std::numeric_limits<float>::infinity());
    // numpy clips in float64 and multiplies by the scale in float64 before the final cast to float32.
    const float yh = static_cast<float>(maxv * static_cast<double>(sc));
    p.scale[o] = sc;
    p.hi[o] = hi;
    p.y_hi[o] = yh;
    if (several_bounds && maxv == 0.0) {
      if (p.zero_bound.empty()) p.zero_bound.resize(n, 0);
      p.zero_bound[static_cast<size_t>(o)] = 1;
    }
    // clip(q, -maxv, maxv) with -maxv > maxv (a negative max_val) gives maxv for every q, as numpy's clip does.
    p.y_lo[o] = maxv < 0 ? yh : -yh;
  });
  return p;
}

void float_quant(const BroadcastPlan& plan, const float* x, const FloatQuantParams& p, float* y, int64_t begin,
                 int64_t end, RoundMode mode, FloatOverflow overflow) {
  auto fn = select_isa(&scalar::float_quant_contiguous, &avx2::float_quant_contiguous,
                       &avx512::float_quant_contiguous);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      fn(x + offs[0], row_at(p, offs[1]), st[1], y + o, n, p.mantissa, p.emin, mode, overflow);
    } else {  // x broadcast along the row (parameters larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i)
        fn(x + offs[0], row_at(p, offs[1] + i * st[1]), 0, y + o + i, 1, p.mantissa, p.emin, mode, overflow);
    }
  });
  if (!p.zero_bound.empty()) patch_zero_bounds(plan, p, y, begin, end, overflow);
}

void float_quant(const BroadcastPlan& plan, const void* x, bool x16, const FloatQuantParams& p, float* y,
                 int64_t begin, int64_t end, RoundMode mode, FloatOverflow overflow) {
  if (!x16) {
    if (p.half) throw_error("input X must be float16 when scale is float16, got float32");
    return float_quant(plan, static_cast<const float*>(x), p, y, begin, end, mode, overflow);
  }
  const auto* xh = static_cast<const uint16_t*>(x);
  auto fn = p.half ? select_isa(&scalar::float_quant_half_contiguous, &avx2::float_quant_half_contiguous,
                                &avx512::float_quant_half_contiguous)
                   : select_isa(&scalar::float_quant_x16_contiguous, &avx2::float_quant_x16_contiguous,
                                &avx512::float_quant_x16_contiguous);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      fn(xh + offs[0], row_at(p, offs[1]), st[1], y + o, n, p.mantissa, p.emin, mode, overflow);
    } else {  // x broadcast along the row (parameters larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i)
        fn(xh + offs[0], row_at(p, offs[1] + i * st[1]), 0, y + o + i, 1, p.mantissa, p.emin, mode, overflow);
    }
  });
  if (!p.zero_bound.empty()) patch_zero_bounds(plan, p, y, begin, end, overflow);
}

}  // namespace ortquant::qonnx
