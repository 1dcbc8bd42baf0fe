// QONNX Quant / IntQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 1, decision 5.
//   q = x / scale + zeropt                                  (float32, true division, no fused multiply-add)
//   signed 1-bit: q = q >= 0 ? 1 : -1                        (qonnx's bipolar special case)
//   else: q = min(q, max_int); q = max(q, min_int); q = round(q)   (clamp before rounding, NaN passes)
//   y = (q - zeropt) * scale
// float16 (int_quant_mixed): X, scale and zeropt are each float32 or float16 and every step runs in the dtype numpy
// promotes its operands to: X / scale in float16 when both are float16, everything after it in float16 when zeropt
// is float16 too, float32 otherwise; the output is float32 (qonnx casts its result).
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
// A float16 bitwidth (its bits): qonnx's min_int/max_int computed in float16 arithmetic, as numpy does.
IntQuantBounds int_quant_bounds_half(bool is_signed, bool narrow, uint16_t bitwidth);

// min_int/max_int of qonnx in float16 arithmetic for a float16 bit width bw (no 1-bit special case):
// p = 2^(bw - 1) or 2^bw, each step rounded to float16 (so 2^16 and above are inf).
void int_bounds_half(bool is_signed, bool narrow, float bw, float* lo, float* hi);

// Bounds used to clamp float16 values: numpy compares exactly and assigns min_int/max_int.astype(float16), which
// is the same as clamping to the bounds rounded to float16 (no float16 lies strictly between a bound and its
// rounding).
IntQuantBounds int_quant_bounds_to_half(IntQuantBounds b);

// A float32 or float16 (f16: IEEE binary16 bits) operand of the mixed-precision Quant.
struct QuantOperand {
  const void* data = nullptr;
  bool f16 = false;
};

// One row segment: x, scale, zeropt advance by their strides (0 or 1).
void int_quant_segment(const float* x, int64_t xs, const float* s, int64_t ss, const float* z, int64_t zs,
                       float* y, int64_t n, const IntQuantBounds& b, RoundMode mode);

// The flat output range [begin, end) of a broadcast Quant (inputs x, scale, zeropt in plan order).
void int_quant(const BroadcastPlan& plan, const float* x, const float* s, const float* z, float* y, int64_t begin,
               int64_t end, const IntQuantBounds& b, RoundMode mode);

// The same with X, scale and zeropt each float32 or float16 (float32 output). `b` holds the bounds in the bit
// width's own precision; they are rounded to float16 here when the clamp runs in float16.
void int_quant_mixed(const BroadcastPlan& plan, QuantOperand x, QuantOperand s, QuantOperand z, float* y,
                     int64_t begin, int64_t end, const IntQuantBounds& b, RoundMode mode);

}  // namespace ortquant::qonnx
