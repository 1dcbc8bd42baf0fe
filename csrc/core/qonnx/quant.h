// QONNX Quant / IntQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 1, decision 5.
//   q = x / scale + zeropt                                  (float32, true division, no fused multiply-add)
//   signed 1-bit: q = q >= 0 ? 1 : -1                        (qonnx's bipolar special case)
//   else: q = min(q, max_int); q = max(q, min_int); q = round(q)   (clamp before rounding, NaN passes)
//   y = (q - zeropt) * scale
#pragma once
#include <cstdint>

#include "core/rounding.h"
#include "core/shape.h"

namespace ortquant::qonnx {

struct IntQuantBounds {
  float lo = 0.f;        // min_int as float32
  float hi = 0.f;        // max_int as float32
  bool bipolar = false;  // signed and bitwidth == 1
};

// qonnx min_int/max_int. A float32 bitwidth is used as float32 (powf, as numpy does); an int32 bitwidth exactly.
// Throws Error for a bitwidth that is not finite and positive.
IntQuantBounds int_quant_bounds(bool is_signed, bool narrow, float bitwidth);
IntQuantBounds int_quant_bounds_int(bool is_signed, bool narrow, int32_t bitwidth);

// One row segment: x, scale, zeropt advance by their strides (0 or 1).
void int_quant_segment(const float* x, int64_t xs, const float* s, int64_t ss, const float* z, int64_t zs,
                       float* y, int64_t n, const IntQuantBounds& b, RoundMode mode);

// The flat output range [begin, end) of a broadcast Quant (inputs x, scale, zeropt in plan order).
void int_quant(const BroadcastPlan& plan, const float* x, const float* s, const float* z, float* y, int64_t begin,
               int64_t end, const IntQuantBounds& b, RoundMode mode);

}  // namespace ortquant::qonnx
