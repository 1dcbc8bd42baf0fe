// Per-ISA entry points of the QuantAvgPool2d loops (see core/isa.h).
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::qonnx {
// s[i] += v[i * stride] for i < n.
ORTQUANT_DECLARE_ISA_FN(void, avgpool_accumulate, (float* s, const float* v, int64_t n, int64_t stride))
// y[i] = float(int64(rint(fl(fl(s[i] / kk) * kk))) >> shift) for i < n (see quantavgpool2d.h); y may be s.
ORTQUANT_DECLARE_ISA_FN(void, avgpool_finish, (const float* s, float* y, int64_t n, float kk, int shift))
}  // namespace ortquant::qonnx
