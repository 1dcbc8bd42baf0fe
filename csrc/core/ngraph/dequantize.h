// nGraph Dequantize (domain "ngraph"), spec: shared/specs/ort-custom-ops.md 4.2, decision 9.
// Per element, with s and z the scale and zero point of the element's position along `axes`:
//   d = q - z                 exactly, in 64-bit integers (nGraph's int32 - int32 may overflow; ours cannot)
//   y = REAL(d) * s           d converted to the output type (one rounding), then one product in that type:
//                             float32: (float)d * s; float16: half((float)half(d) * (float)s), i.e. the float16
//                             product correctly rounded (nGraph's static_cast<REAL>(q - z) * scale)
// The output type is scale's type (float32 or float16).
#pragma once
#include <cstdint>

#include "core/ngraph/params.h"
#include "core/shape.h"

namespace ortquant::ngraph {

// The flat range [begin, end) of the output. `plan` is make_broadcast_plan(input shape, {input shape,
// param_shape(...)}); q and zero_point are of type qt, scale and y of type rt.
void dequantize(const BroadcastPlan& plan, QuantType qt, RealType rt, const void* q, const void* scale,
                const void* zero_point, void* y, int64_t begin, int64_t end);

}  // namespace ortquant::ngraph
