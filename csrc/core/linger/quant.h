// linger Quant / Dequant / Requant (thinker domain), spec: linger.md section 0, linger-extra.md section 7.
//   Quant    q = clamp(floor(fl32(fl32(x * scale_x) + 0.5)), -2^(bits-1), 2^(bits-1) - 1), float32 arithmetic as
//            linger's Quant.quant; NaN gives 0 (undefined in linger), +-inf saturate.
//   Dequant  y = float32(q) / scale_o (float32 division; multiplication by the exact reciprocal when scale_o is a
//            power of two, which is the same value).
//   Requant  y = saturate_o_bits(floor(x * scale_o / scale_x + 1/2)), exact integer arithmetic.
#pragma once
#include <cstdint>

#include "core/requant.h"

namespace ortquant::linger {

// Container width for a bit count: 8, 16 or 32 (bits in 1..32).
int container_bits(int bits);

void quant(const float* x, int8_t* y, int64_t n, float scale, int bits);    // bits <= 8
void quant(const float* x, int16_t* y, int64_t n, float scale, int bits);   // 9..16
void quant(const float* x, int32_t* y, int64_t n, float scale, int bits);   // 17..32

template <class T>  // int8_t, int16_t, int32_t
void dequant(const T* x, float* y, int64_t n, float scale);

// Requantization between int8/int16/int32 containers: y = saturate(r(x), o_bits).
template <class Ti, class To>
void requant(const Ti* x, To* y, int64_t n, const luna::Rescale& r, int o_bits);

}  // namespace ortquant::linger
