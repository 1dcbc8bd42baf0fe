// linger iqAdd (thinker domain), spec: linger.md section 1 "iqAdd".
//   int8 + int8:      z = saturate8(floor(x * so/sx + 1/2) + floor(y * so/sy + 1/2))   (operands rounded separately)
//   int8 + float32 c: z = saturate8(toint_x86(floor(fl32(fl32(fl32(x / sx) + fl32(c / sy)) * so) + 0.5)))
//                     (linger's iqAddScalar float32 sequence; linger writes scale_y = 1.0, so c / sy = c)
#pragma once
#include "core/linger/elementwise.h"

namespace ortquant::linger {

BinaryI8 make_iqadd(float sx, float sy, float so);
// x + c for a constant c (already a float32 tensor value), tabulated over the 256 values of x.
UnaryI8 make_iqadd_const(float sx, float sy, float so, float c);
// One element of the float form.
int8_t iqadd_float(int8_t x, float y, float sx, float sy, float so);

}  // namespace ortquant::linger
