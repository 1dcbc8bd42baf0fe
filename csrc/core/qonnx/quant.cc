#include "core/qonnx/quant.h"

#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/qonnx/quant_kernels.h"

namespace ortquant::qonnx {

IntQuantBounds int_quant_bounds(bool is_signed, bool narrow, float bw) {
  if (!std::isfinite(bw) || !(bw > 0.f)) throw_error("bitwidth must be finite and positive, got ", bw);
  IntQuantBounds b;
  if (is_signed && bw == 1.f) {
    b.bipolar = true;
    return b;
  }
  // Same float32 expressions as qonnx's min_int/max_int on a float32 bitwidth.
  if (is_signed) {
    const float p = std::pow(2.0f, bw - 1.0f);
    b.lo = narrow ? -p + 1.0f : -p;
    b.hi = p - 1.0f;
  } else {
    const float p = std::pow(2.0f, bw);
    b.lo = 0.0f * bw;
    b.hi = narrow ? p - 2.0f : p - 1.0f;
  }
  return b;
}

IntQuantBounds int_quant_bounds_int(bool is_signed, bool narrow, int32_t bw) {
  if (bw <= 0) throw_error("bitwidth must be positive, got ", bw);
  if (bw > 62) throw_error("bitwidth must be at most 62 for an int32 bitwidth, got ", bw);
  IntQuantBounds b;
  if (is_signed && bw == 1) {
    b.bipolar = true;
    return b;
  }
  const int64_t one = 1;
  if (is_signed) {
    const int64_t p = one << (bw - 1);
    b.lo = static_cast<float>(narrow ? -p + 1 : -p);
    b.hi = static_cast<float>(p - 1);
  } else {
    const int64_t p = one << bw;
    b.lo = 0.f;
    b.hi = static_cast<float>(narrow ? p - 2 : p - 1);
  }
  return b;
}

void int_bounds_half(bool is_signed, bool narrow, float bw, float* lo, float* hi) {
  // numpy on a float16 bit width: 2 ** (bw - 1), -p + 1, p - 1, 0 * bw ... each rounded to float16.
  if (is_signed) {
    const float p = round_to_half(std::pow(2.0f, round_to_half(bw - 1.0f)));
    *lo = narrow ? round_to_half(-p + 1.0f) : -p;
    *hi = round_to_half(p - 1.0f);
  } else {
    const float p = round_to_half(std::pow(2.0f, bw));
    *lo = 0.0f * bw;
    *hi = round_to_half(narrow ? p - 2.0f : p - 1.0f);
  }
}

IntQuantBounds int_quant_bounds_half(bool is_signed, bool narrow, uint16_t bits) {
  const float bw = half_to_float(bits);
  if (!std::isfinite(bw) || !(bw > 0.f)) throw_error("bitwidth must be finite and positive, got ", bw);
  IntQuantBounds b;
  if (is_signed && bw == 1.f) {
    b.bipolar = true;
    return b;
  }
  int_bounds_half(is_signed, narrow, bw, &b.lo, &b.hi);
  return b;
}

IntQuantBounds int_quant_bounds_to_half(IntQuantBounds b) {
  b.lo = round_to_half(b.lo);
  b.hi = round_to_half(b.hi);
  return b;
}

void int_quant_segment(const float* x, int64_t xs, const float* s, int64_t ss, const float* z, int64_t zs, float* y,
                       int64_t n, const IntQuantBounds& b, RoundMode mode) {
  if (xs == 1) {
    auto fn = select_isa(&scalar::int_quant_contiguous, &avx2::int_quant_contiguous, &avx512::int_quant_contiguous);
    fn(x, s, ss, z, zs, y, n, b, mode);
    return;
  }
  // x broadcast along the row (parameters larger than x): one element at a time.
  for (int64_t i = 0; i < n; ++i) {
    scalar::int_quant_contiguous(x + i * xs, s + i * ss, 0, z + i * zs, 0, y + i, 1, b, mode);
  }
}

void int_quant(const BroadcastPlan& plan, const float* x, const float* s, const float* z, float* y, int64_t begin,
               int64_t end, const IntQuantBounds& b, RoundMode mode) {
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    int_quant_segment(x + offs[0], st[0], s + offs[1], st[1], z + offs[2], st[2], y + o, n, b, mode);
  });
}

namespace {
QuantOperand at(const QuantOperand& t, int64_t i) {
  return {static_cast<const char*>(t.data) + i * (t.f16 ? 2 : 4), t.f16};
}
}  // namespace

void int_quant_mixed(const BroadcastPlan& plan, QuantOperand x, QuantOperand s, QuantOperand z, float* y,
                     int64_t begin, int64_t end, const IntQuantBounds& b, RoundMode mode) {
  const IntQuantBounds bounds = x.f16 && s.f16 && z.f16 ? int_quant_bounds_to_half(b) : b;
  auto fn = select_isa(&scalar::int_quant_mixed_contiguous, &avx2::int_quant_mixed_contiguous,
                       &avx512::int_quant_mixed_contiguous);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      fn(at(x, offs[0]), at(s, offs[1]), st[1], at(z, offs[2]), st[2], y + o, n, bounds, mode);
      return;
    }
    // x broadcast along the row (parameters larger than x): one element at a time.
    for (int64_t i = 0; i < n; ++i)
      fn(at(x, offs[0]), at(s, offs[1] + i * st[1]), 0, at(z, offs[2] + i * st[2]), 0, y + o + i, 1, bounds, mode);
  });
}

}  // namespace ortquant::qonnx
