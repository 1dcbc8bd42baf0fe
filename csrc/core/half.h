// IEEE 754 binary16 (float16) <-> float32 conversions in portable C++ (no F16C needed), stored as uint16_t.
// half_to_float is exact; float_to_half rounds to nearest, ties to even, overflows to +-inf, keeps NaN quiet
// and the sign of zero. Header-only and `static` (internal linkage) on purpose: each ISA file compiles its own copy
// with its own flags, so the linker can never hand an AVX-512 copy to the scalar path.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ortquant {

static inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

static inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in float32.
  const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
  return bits_float(sign | float_bits(mag));
}

static inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN (NaN stays NaN: quiet bit set, top payload bits kept)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                                              // >= 2^-14: a normal half
    ax += 0xfffu + ((ax >> 13) & 1u);                                   // round the low 13 bits, ties to even
    return static_cast<uint16_t>(sign | ((ax - (112u << 23)) >> 13));
  }
  // Below 2^-14: a subnormal half (or zero, or the smallest normal after rounding up). |f| * 2^24 is exact
  // and < 1024; rounding it to an integer (ties to even) gives the encoding directly.
  const float t = std::fabs(f) * 16777216.0f;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(t)));
}

// f rounded to float16 precision and range, returned as float32.
static inline float round_to_half(float f) { return half_to_float(float_to_half(f)); }

}  // namespace ortquant
