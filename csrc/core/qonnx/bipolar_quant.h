// QONNX BipolarQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 2.
//   y = (x >= 0 ? +1 : -1) * scale      float32; -0 gives +1, NaN gives -1 (the comparison is false)
// X and scale broadcast like numpy; the sign is taken from X itself, not from X / scale.
// float16: X and scale are each float32 or float16. qonnx does not cast its result, so the output has numpy's
// dtype: float16 when both are float16 (the product by +-1 is exact: y = +-scale), float32 otherwise.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace ortquant::qonnx {

// The flat output range [begin, end) of a broadcast BipolarQuant (plan over the shapes of x and scale).
void bipolar_quant(const BroadcastPlan& plan, const float* x, const float* scale, float* y, int64_t begin,
                   int64_t end);

// The same with X and scale each float32 or float16 (f16: IEEE binary16 bits); y is float16 when both are.
void bipolar_quant_mixed(const BroadcastPlan& plan, const void* x, bool x16, const void* scale, bool s16, void* y,
                         int64_t begin, int64_t end);

}  // namespace ortquant::qonnx
