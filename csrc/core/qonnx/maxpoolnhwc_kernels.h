// Per-ISA entry points of the MaxPoolNHWC loops (see core/isa.h).
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::qonnx {
// m[i] = (v[i] > m[i] || v[i] is NaN) ? v[i] : m[i] for i < n.
ORTQUANT_DECLARE_ISA_FN(void, max_accumulate, (float* m, const float* v, int64_t n))
}  // namespace ortquant::qonnx
