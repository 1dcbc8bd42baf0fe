// linger iqMul (thinker domain), spec: linger.md section 1 "iqMul".
//   int8 * int8:      z = saturate8(floor(x * y * so/(sx*sy) + 1/2))   (the ratio in double; exact for powers of two)
//   int8 * float32 c: z = saturate8(toint_x86(floor(fl32(fl32(fl32(x / sx) * fl32(c / sy)) * so) + 0.5)))
//                     (ortquant's extension: linger itself writes an int8 constant for x * c)
#pragma once
#include "core/linger/elementwise.h"

namespace ortquant::linger {

BinaryI8 make_iqmul(float sx, float sy, float so);
int8_t iqmul_float(int8_t x, float y, float sx, float sy, float so);
UnaryI8 make_iqmul_const_float(float sx, float sy, float so, float c);

}  // namespace ortquant::linger
