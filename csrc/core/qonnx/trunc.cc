#include "core/qonnx/trunc.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/half.h"
#include "core/qonnx/quant.h"
#include "core/qonnx/trunc_kernels.h"

namespace ortquant::qonnx {
namespace {

void check_bitwidth(const NumTensor& b, int64_t i, const char* what) {
  if (b.is_int32) {
    if (b.i32(i) <= 0) throw_error("input ", what, " must be positive, got ", b.i32(i));
  } else {
    const float v = b.f32(i);
    if (!std::isfinite(v) || !(v > 0.f)) throw_error("input ", what, " must be finite and positive, got ", v);
  }
}

// qonnx min_int/max_int (no 1-bit special case here). A float32 bit width is used in float32 as numpy does, a
// float16 one in float16; an int32 one exactly (numpy's int32 result converted to float32 by astype; beyond 62
// bits we refuse).
void int_bounds(bool is_signed, bool narrow, const NumTensor& b, int64_t i, float* lo, float* hi) {
  if (b.is_f16) return int_bounds_half(is_signed, narrow, b.f32(i), lo, hi);
  if (b.is_int32) {
    const int32_t bw = b.i32(i);
    if (bw > 62) throw_error("input out_bitwidth must be at most 62 when it is int32, got ", bw);
    const int64_t one = 1;
    if (is_signed) {
      const int64_t p = one << (bw - 1);
      *lo = static_cast<float>(narrow ? -p + 1 : -p);
      *hi = static_cast<float>(p - 1);
    } else {
      const int64_t p = one << bw;
      *lo = 0.f;
      *hi = static_cast<float>(narrow ? p - 2 : p - 1);
    }
    return;
  }
  const float bw = b.f32(i);
  if (is_signed) {
    const float p = std::pow(2.0f, bw - 1.0f);
    *lo = narrow ? -p + 1.0f : -p;
    *hi = p - 1.0f;
  } else {
    const float p = std::pow(2.0f, bw);
    *lo = 0.0f * bw;
    *hi = narrow ? p - 2.0f : p - 1.0f;
  }
}

// With a float16 scale every other float parameter must be float16 as well (see trunc.h).
void require_half(const NumTensor& t, const char* what) {
  if (!t.is_f16)
    throw_error("input ", what, " must be float16 when scale is float16 (numpy would leave float16 there), got ",
                t.is_int32 ? "int32" : "float32");
}

TruncRow row_at(const TruncParams& p, int64_t off) {
  TruncRow r{};
  r.s = p.scale.data() + off;
  r.z = p.zeropt.data() + off;
  if (p.version == 1) {
    if (p.f64) r.ts64 = p.trunc_scale64.data() + off;
    else r.ts = p.trunc_scale.data() + off;
  } else {
    r.t = p.t.data() + off;
    r.lo = p.lo.data() + off;
    r.hi = p.hi.data() + off;
    r.oz = p.out_zeropt.data() + off;
    r.os = p.out_scale.data() + off;
  }
  return r;
}

}  // namespace

float trunc_power_of_two(float ratio) {
  if (std::isnan(ratio) || ratio < 0.f) return std::numeric_limits<float>::quiet_NaN();
  if (ratio == 0.f) return 0.f;  // log2(0) = -inf, 2^-inf = 0
  if (std::isinf(ratio)) return ratio;
  // ratio = m * 2^k with m in [1, 2); log2(ratio) rounds up iff m > sqrt(2), i.e. m*m > 2 (exact in double).
  // log2 of a float is never exactly k + 0.5 (sqrt(2) is irrational), so ties cannot occur.
  const int k = std::ilogb(ratio);
  const double m = std::ldexp(static_cast<double>(ratio), -k);
  const int e = k + (m * m > 2.0 ? 1 : 0);
  return std::ldexp(1.0f, e);  // 2^128 overflows to inf like numpy's float32 power
}

TruncParams trunc_v1_params(const NumTensor& scale, const NumTensor& zeropt, const NumTensor& in_bw,
                            const NumTensor& out_bw) {
  TruncParams p;
  p.version = 1;
  p.half = scale.is_f16;
  if (p.half) {
    require_half(zeropt, "zeropt");
    require_half(in_bw, "in_bitwidth");
    require_half(out_bw, "out_bitwidth");
  }
  p.shape = broadcast_shapes({scale.shape, zeropt.shape, in_bw.shape, out_bw.shape});
  p.f64 = in_bw.is_int32 || out_bw.is_int32;
  const auto n = static_cast<size_t>(shape_size(p.shape));
  p.scale.resize(n);
  p.zeropt.resize(n);
  if (p.f64) p.trunc_scale64.resize(n);
  else p.trunc_scale.resize(n);
  for (int64_t i = 0; i < in_bw.size(); ++i) check_bitwidth(in_bw, i, "in_bitwidth");
  for (int64_t i = 0; i < out_bw.size(); ++i) check_bitwidth(out_bw, i, "out_bitwidth");
  for_each_broadcast(p.shape, {scale.shape, zeropt.shape, in_bw.shape, out_bw.shape},
                     [&](int64_t o, const int64_t* idx) {
                       p.scale[o] = scale.f32(idx[0]);
                       p.zeropt[o] = zeropt.f32(idx[1]);
                       if (p.f64) {
                         // numpy: int32 - int32 stays int32 (exact here), float32 - int32 is float64; 2.0 ** that
                         // is float64.
                         const double d = in_bw.f64(idx[2]) - out_bw.f64(idx[3]);
                         p.trunc_scale64[o] = std::pow(2.0, d);
                       } else if (in_bw.is_f16 && out_bw.is_f16) {
                         // float16 - float16 and 2.0 ** float16 stay float16 in numpy
                         const float d = round_to_half(in_bw.f32(idx[2]) - out_bw.f32(idx[3]));
                         p.trunc_scale[o] = round_to_half(std::pow(2.0f, d));
                       } else {
                         const float d = in_bw.f32(idx[2]) - out_bw.f32(idx[3]);
                         p.trunc_scale[o] = std::pow(2.0f, d);
                       }
                     });
  return p;
}

TruncParams trunc_v2_params(const NumTensor& scale, const NumTensor& zeropt, const NumTensor& out_scale,
                            const NumTensor& out_bw, bool is_signed, bool narrow) {
  TruncParams p;
  p.version = 2;
  p.half = scale.is_f16;
  if (p.half) {
    require_half(zeropt, "zeropt");
    require_half(out_scale, "out_scale");
  }
  p.shape = broadcast_shapes({scale.shape, zeropt.shape, out_scale.shape, out_bw.shape});
  const auto n = static_cast<size_t>(shape_size(p.shape));
  for (auto* v : {&p.scale, &p.zeropt, &p.t, &p.lo, &p.hi, &p.out_zeropt, &p.out_scale}) v->resize(n);
  for (int64_t i = 0; i < out_bw.size(); ++i) check_bitwidth(out_bw, i, "out_bitwidth");
  for_each_broadcast(p.shape, {scale.shape, zeropt.shape, out_scale.shape, out_bw.shape},
                     [&](int64_t o, const int64_t* idx) {
                       const float sc = scale.f32(idx[0]);
                       const float zp = zeropt.f32(idx[1]);
                       const float os = out_scale.f32(idx[2]);
                       p.scale[o] = sc;
                       p.zeropt[o] = zp;
                       p.out_scale[o] = os;
                       int_bounds(is_signed, narrow, out_bw, idx[3], &p.lo[o], &p.hi[o]);
                       if (p.half) {
                         // numpy in float16: the ratio, 2 ** (an integer) and zeropt / t are float16 values; the
                         // clamp assigns the bounds cast to float16
                         const float t = round_to_half(trunc_power_of_two(round_to_half(os / sc)));
                         p.t[o] = t;
                         p.out_zeropt[o] = round_to_half(zp / t);
                         p.lo[o] = round_to_half(p.lo[o]);
                         p.hi[o] = round_to_half(p.hi[o]);
                       } else {
                         const float t = trunc_power_of_two(os / sc);
                         p.t[o] = t;
                         p.out_zeropt[o] = zp / t;
                       }
                     });
  return p;
}

void trunc(const BroadcastPlan& plan, const float* x, const TruncParams& p, float* y, int64_t begin, int64_t end,
           RoundMode mode) {
  const bool v1 = p.version == 1;
  auto f1 = select_isa(&scalar::trunc_v1_contiguous, &avx2::trunc_v1_contiguous, &avx512::trunc_v1_contiguous);
  auto f2 = select_isa(&scalar::trunc_v2_contiguous, &avx2::trunc_v2_contiguous, &avx512::trunc_v2_contiguous);
  auto call = [&](const float* xr, int64_t poff, int64_t ps, float* yr, int64_t n) {
    const TruncRow row = row_at(p, poff);
    if (v1) f1(xr, row, ps, yr, n, p.f64, mode);
    else f2(xr, row, ps, yr, n, mode);
  };
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      call(x + offs[0], offs[1], st[1], y + o, n);
    } else {  // x broadcast along the row (parameters larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i) call(x + offs[0], offs[1] + i * st[1], 0, y + o + i, 1);
    }
  });
}

void trunc(const BroadcastPlan& plan, const void* x, bool x16, const TruncParams& p, void* y, int64_t begin,
           int64_t end, RoundMode mode) {
  if (!x16) {
    if (p.half) throw_error("input X must be float16 when scale is float16, got float32");
    return trunc(plan, static_cast<const float*>(x), p, static_cast<float*>(y), begin, end, mode);
  }
  const auto* xh = static_cast<const uint16_t*>(x);
  auto fh = select_isa(&scalar::trunc_half_contiguous, &avx2::trunc_half_contiguous, &avx512::trunc_half_contiguous);
  auto fx = select_isa(&scalar::trunc_x16_contiguous, &avx2::trunc_x16_contiguous, &avx512::trunc_x16_contiguous);
  auto call = [&](const uint16_t* xr, int64_t poff, int64_t ps, int64_t o, int64_t n) {
    const TruncRow row = row_at(p, poff);
    if (p.half) fh(xr, row, ps, static_cast<uint16_t*>(y) + o, n, p.version, mode);
    else fx(xr, row, ps, static_cast<float*>(y) + o, n, p.version, p.f64, mode);
  };
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      call(xh + offs[0], offs[1], st[1], o, n);
    } else {  // x broadcast along the row (parameters larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i) call(xh + offs[0], offs[1] + i * st[1], 0, o + i, 1);
    }
  });
}

}  // namespace ortquant::qonnx
