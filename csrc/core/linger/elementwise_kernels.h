// Per-ISA loops of the bandwidth-bound linger elementwise ops (see core/isa.h): written once in
// elementwise_impl.inc, compiled by elementwise_{scalar,avx2,avx512}.cc. Every loop is exact integer (or exact
// IEEE float32) arithmetic, so all paths agree bit for bit; the scalar one is the oracle in tests.
//
// Shift exponents: sh(v, e) = v << e for e >= 0, floor(v / 2^-e + 1/2) for e < 0 (luna round half up). Callers
// keep e within [kMinShift, kMaxShift] so that int32 lanes cannot overflow for int8/int16 data.
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::linger {

constexpr int kMinShift = -31;
constexpr int kMaxShift = 16;

ORTQUANT_DECLARE_ISA_FN(void, quant_f32_i8, (const float* x, int8_t* y, int64_t n, float scale, float lo, float hi))
ORTQUANT_DECLARE_ISA_FN(void, quant_f32_i16, (const float* x, int16_t* y, int64_t n, float scale, float lo, float hi))
// y = float(x) * s when `mul` (s is then the exact reciprocal of a power-of-two scale), float(x) / s otherwise.
ORTQUANT_DECLARE_ISA_FN(void, dequant_i8_f32, (const int8_t* x, float* y, int64_t n, float s, bool mul))
ORTQUANT_DECLARE_ISA_FN(void, dequant_i16_f32, (const int16_t* x, float* y, int64_t n, float s, bool mul))
ORTQUANT_DECLARE_ISA_FN(void, dequant_i32_f32, (const int32_t* x, float* y, int64_t n, float s, bool mul))
// y = saturate(sh(x, e)) to the output type.
ORTQUANT_DECLARE_ISA_FN(void, shift_i8_i8, (const int8_t* x, int8_t* y, int64_t n, int e))
ORTQUANT_DECLARE_ISA_FN(void, shift_i8_i16, (const int8_t* x, int16_t* y, int64_t n, int e))
ORTQUANT_DECLARE_ISA_FN(void, shift_i16_i8, (const int16_t* x, int8_t* y, int64_t n, int e))
ORTQUANT_DECLARE_ISA_FN(void, shift_i16_i16, (const int16_t* x, int16_t* y, int64_t n, int e))
// z = saturate8(sh(x, ex) + sh(y, ey)); xs, ys are 0 (broadcast scalar) or 1. |ex|, |ey| as above, ex, ey <= 16.
ORTQUANT_DECLARE_ISA_FN(void, add_shift_i8,
                        (const int8_t* x, int64_t xs, const int8_t* y, int64_t ys, int8_t* z, int64_t n, int ex, int ey))
// z = saturate8(sh(x * y, e)).
ORTQUANT_DECLARE_ISA_FN(void, mul_shift_i8,
                        (const int8_t* x, int64_t xs, const int8_t* y, int64_t ys, int8_t* z, int64_t n, int e))
// z = table[x + 128] (unary int8 lookup) and z = table[(uint8(x) << 8) | uint8(y)] (binary int8 lookup).
ORTQUANT_DECLARE_ISA_FN(void, lut_i8, (const int8_t* x, int8_t* y, int64_t n, const int8_t* table))
ORTQUANT_DECLARE_ISA_FN(void, lut2_i8,
                        (const int8_t* x, int64_t xs, const int8_t* y, int64_t ys, int8_t* z, int64_t n,
                         const int8_t* table))

}  // namespace ortquant::linger
