// QONNX BipolarQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 2.
//   y = (x >= 0 ? +1 : -1) * scale      float32; -0 gives +1, NaN gives -1 (the comparison is false)
// X and scale broadcast like numpy; the sign is taken from X itself, not from X / scale.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace ortquant::qonnx {

// The flat output range [begin, end) of a broadcast BipolarQuant (plan over the shapes of x and scale).
void bipolar_quant(const BroadcastPlan& plan, const float* x, const float* scale, float* y, int64_t begin,
                   int64_t end);

}  // namespace ortquant::qonnx
