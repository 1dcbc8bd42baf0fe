// Per-ISA entry points of the BipolarQuant loop (see core/isa.h).
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::qonnx {
// One row: x contiguous, scale with stride ss (0 or 1).
ORTQUANT_DECLARE_ISA_FN(void, bipolar_quant_contiguous, (const float* x, const float* s, int64_t ss, float* y, int64_t n))
// One row with x and scale each float32 or float16; y is float16 when both are, float32 otherwise.
ORTQUANT_DECLARE_ISA_FN(void, bipolar_quant_mixed_contiguous,
                        (const void* x, bool x16, const void* s, bool s16, int64_t ss, void* y, int64_t n))
}  // namespace ortquant::qonnx
