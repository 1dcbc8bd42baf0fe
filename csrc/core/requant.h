// luna_quant arithmetic shared by the linger ops (and by the LSTM/GRU and matrix helpers): round half up
// (floor(v + 1/2)) and saturation to a signed integer range (decision 11; spec linger.md section 0).
//
//   rhu(v, k)          = floor(v / 2^k + 1/2)                  (k >= 1 an arithmetic shift, k <= 0 a left shift)
//   Rescale(r)(v)      = floor(v * r + 1/2)                    (any positive ratio r = s_out / s_in)
//   saturate(v, bits)  = clamp(v, -2^(bits-1), 2^(bits-1) - 1)
//
// A ratio that is an exact power of two (all that linger 1.1.1 writes) is applied as an integer shift, exact for
// every int64 input; any other ratio is applied in double precision (v * r rounded once, + 0.5, floor).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace ortquant::luna {

// Range of a signed `bits`-bit integer (1 <= bits <= 63).
constexpr int64_t int_min(int bits) { return -(int64_t(1) << (bits - 1)); }
constexpr int64_t int_max(int bits) { return (int64_t(1) << (bits - 1)) - 1; }

inline int64_t saturate(int64_t v, int bits) {
  const int64_t lo = int_min(bits), hi = int_max(bits);
  return v < lo ? lo : (v > hi ? hi : v);
}

template <class T>
inline T saturate_to(int64_t v) {
  constexpr int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  return static_cast<T>(v < lo ? lo : (v > hi ? hi : v));
}

// floor(v / 2^k + 1/2) for k >= 1; v << -k for k <= 0 (saturating at the int64 range). Exact for all int64 v.
inline int64_t rhu(int64_t v, int k) {
  if (k <= 0) {
    const int s = -k;
    if (v == 0) return 0;
    if (s >= 63) return v > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
    const int64_t lim = std::numeric_limits<int64_t>::max() >> s;
    if (v > lim) return std::numeric_limits<int64_t>::max();
    if (v < -lim - 1) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(static_cast<uint64_t>(v) << s);
  }
  if (k >= 64) return 0;  // |v| < 2^63 <= 2^(k-1): floor(v/2^k + 1/2) = 0 for every int64 v
  // (v + 2^(k-1)) >> k without overflow: split v into quotient and remainder of 2^k.
  const int64_t q = v >> k;                                           // floor(v / 2^k)
  const uint64_t r = static_cast<uint64_t>(v) & ((uint64_t(1) << k) - 1);  // v - q * 2^k, in [0, 2^k)
  return q + (r >= (uint64_t(1) << (k - 1)) ? 1 : 0);
}

// Exponent e with x == 2^e exactly (x finite and positive), or false.
inline bool pow2_exponent(double x, int* e) {
  if (!(x > 0.0) || !std::isfinite(x)) return false;
  int ex = 0;
  const double m = std::frexp(x, &ex);  // x = m * 2^ex, m in [0.5, 1)
  if (m != 0.5) return false;
  *e = ex - 1;
  return true;
}

// Floor of a double, clamped to the int64 range (NaN gives 0; callers never pass NaN).
inline int64_t floor_to_int64(double v) {
  const double f = std::floor(v);
  if (!(f == f)) return 0;
  if (f >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (f < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(f);
}

// v -> floor(v * ratio + 1/2), the luna requantization by a scale ratio (s_out / s_in).
struct Rescale {
  double ratio = 1.0;
  bool pow2 = true;
  int shift = 0;  // ratio == 2^shift when pow2

  Rescale() = default;
  explicit Rescale(double r) : ratio(r) {
    if (!(r > 0.0) || !std::isfinite(r)) throw_error("scale ratio must be finite and positive, got ", r);
    pow2 = pow2_exponent(r, &shift);
  }
  bool identity() const { return pow2 && shift == 0; }
  int64_t operator()(int64_t v) const {
    if (pow2) return rhu(v, -shift);
    return floor_to_int64(static_cast<double>(v) * ratio + 0.5);
  }
};

// Validates a scale attribute: finite and positive (a scale is 2^n in linger, meaning q = round(x * scale)).
inline void check_scale(const char* name, double s) {
  if (!(s > 0.0) || !std::isfinite(s)) throw_error("attribute '", name, "' must be a finite positive scale, got ", s);
}

// float32 -> int32 as x86's cvttss2si does (torch's `.int()` on the CPU linger ran on): truncation toward zero;
// NaN, +-inf and anything outside [-2^31, 2^31) give INT32_MIN ("integer indefinite"). linger-extra.md.
inline int32_t x86_float_to_int32(float f) {
  if (!(f >= -2147483648.0f && f < 2147483648.0f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(f);
}

// float32 -> int64 as x86's 64-bit cvttss2si (torch `.long()`): out of range and NaN give INT64_MIN.
inline int64_t x86_float_to_int64(float f) {
  if (!(f >= -9223372036854775808.0f && f < 9223372036854775808.0f)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(f);
}

// The float32 output step of linger's float-path ops (iqAdd/iqMul/iqDiv with a float operand): a float32 value z
// at scale 1 becomes saturate(toint_x86(floor(fl32(fl32(z * scale_o) + 0.5))), bits). Note the x86 artefact: NaN,
// infinities and |z * scale_o| >= 2^31 give INT32_MIN, i.e. the minimum of the range.
inline int64_t float_out(float z, float scale_o, int bits) {
  float w = z * scale_o;
  w = w + 0.5f;
  w = std::floor(w);
  return saturate(x86_float_to_int32(w), bits);
}

}  // namespace ortquant::luna
