// Per-ISA entry points of the nGraph Quantize/Dequantize loops (see core/isa.h). One contiguous run of n
// elements; the scale and zero point advance with the elements when `pv` (per-axis run), else stay at [0].
#pragma once
#include "core/isa.h"
#include "core/ngraph/params.h"
#include "core/rounding.h"

namespace ortquant::ngraph {
ORTQUANT_DECLARE_ISA_FN(void, quantize_run,
                        (RealType rt, QuantType qt, const void* x, const void* s, const void* z, bool pv, void* y,
                         int64_t n, RoundMode mode))
ORTQUANT_DECLARE_ISA_FN(void, dequantize_run,
                        (QuantType qt, RealType rt, const void* q, const void* s, const void* z, bool pv, void* y,
                         int64_t n))
}  // namespace ortquant::ngraph
