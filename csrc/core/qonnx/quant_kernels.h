// Per-ISA entry points of the Quant loops (see core/isa.h).
#pragma once
#include "core/isa.h"
#include "core/qonnx/quant.h"

namespace ortquant::qonnx {
ORTQUANT_DECLARE_ISA_FN(void, int_quant_contiguous,
                        (const float* x, const float* s, int64_t ss, const float* z, int64_t zs, float* y, int64_t n,
                         const IntQuantBounds& b, RoundMode mode))
}  // namespace ortquant::qonnx
