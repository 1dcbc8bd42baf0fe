// linger iqDiv (thinker domain), spec: linger-extra.md section 3. linger's float32 sequence, for both forms:
//   z = saturate8(toint_x86(floor(fl32(fl32(fl32(x / sx) / yf) * so) + 0.5)))
// with yf = fl32(y / sy) for an int8 divisor and yf = fl32(c / sy) for a float32 divisor (linger writes scale_y = 1).
// Division by zero (and 0/0) gives -128, as on the x86 CPU linger ran on (INT32_MIN clamped).
// int8/int8 is tabulated over all 65,536 pairs, a constant divisor over the 256 values of x.
#pragma once
#include "core/linger/elementwise.h"

namespace ortquant::linger {

int8_t iqdiv_float(int8_t x, float yf, float sx, float so);  // yf: the divisor as a float32 value
BinaryI8 make_iqdiv(float sx, float sy, float so);
UnaryI8 make_iqdiv_const(float sx, float sy, float so, float c);

}  // namespace ortquant::linger
