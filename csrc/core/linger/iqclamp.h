// linger iqClamp (thinker domain), spec: linger.md section 1 "iqClamp".
//   q = floor(x * so/sx + 1/2), then clamp to [max(-128, ceil(min * so)), min(127, floor(max * so))]
// (bounds in double). For the values linger allows (max = 127/2^n, min in {0, -8}) this is linger's
// "requant, clamp at 0 when min == 0, saturate to int8".
#pragma once
#include "core/linger/elementwise.h"

namespace ortquant::linger {

// Throws Error when min > max or either is NaN.
UnaryI8 make_iqclamp(float sx, float so, float min, float max);

}  // namespace ortquant::linger
