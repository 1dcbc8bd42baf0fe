// nGraph Quantize (domain "ngraph"), spec: shared/specs/ort-custom-ops.md 4.1, decisions 9-10.
// Per element, with s and z the scale and zero point of the element's position along `axes`:
//   q = x / s                 true division in the input precision (float32, or float16 for float16 input)
//   r = round(q)              the exact rounding engine (nine nGraph modes; no float artefacts)
//   v = r + z                 exactly (as if in unbounded integers)
//   y = saturate(v)           to the output type's range (int32 included); NaN quotients give z
// The output type is zero_point's type (int8, uint8, int16, uint16, int32).
#pragma once
#include <cstdint>

#include "core/ngraph/params.h"
#include "core/rounding.h"
#include "core/shape.h"

namespace ortquant::ngraph {

// True for the nine exact modes nGraph names (parse_ngraph_round_mode yields only these).
bool is_ngraph_round_mode(RoundMode mode);

// The flat range [begin, end) of the output. `plan` is make_broadcast_plan(input shape, {input shape,
// param_shape(...)}); x and scale are of type rt, zero_point and y of type qt. Throws Error for a mode that is not
// one of the nine nGraph modes.
void quantize(const BroadcastPlan& plan, RealType rt, QuantType qt, const void* x, const void* scale,
              const void* zero_point, void* y, int64_t begin, int64_t end, RoundMode mode);

}  // namespace ortquant::ngraph
