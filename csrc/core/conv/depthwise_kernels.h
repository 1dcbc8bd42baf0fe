// Per-ISA entry points of the depthwise loops (see core/isa.h for the pattern).
#pragma once
#include "core/conv/conv.h"
#include "core/isa.h"

namespace ortquant::conv {
ORTQUANT_DECLARE_ISA_FN(void, depthwise_planes, (const DepthwiseArgs& d, int64_t p0, int64_t p1, int8_t* phases, int32_t* acc))
}  // namespace ortquant::conv
