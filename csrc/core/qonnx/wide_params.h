// QONNX ops on float64 / int64 parameter inputs (models from qonnx's QKeras/hls4ml converter store scales, zero
// points and bit widths as double, sometimes int64). qonnx computes with numpy, whose promotion of a float32 array
// with a float64 array is float64 (NEP 50: 0-d arrays are not "weak"), so every step from the first float64
// operand on runs in float64; qonnx then casts Quant's result to float32 and returns BipolarQuant's as float64.
// ortquant computes each step in the precision numpy uses and rounds the result to float32 once (see docs/ops.md,
// "float64 and int64 parameters").
//
//   Quant:        d = X / scale   (float32 when both are float32, else float64)
//                 d = d + zeropt  (float64 from here on)
//                 signed and bitwidth == 1: q = d >= 0 ? 1 : -1
//                 else q = round(max(min(d, max_int), min_int))   in float64 (NaN passes)
//                 Y = float32((q - zeropt) * scale)
//   BipolarQuant: Y = float32((X >= 0 ? 1 : -1) * scale)
//   bounds:       a float64 bit width gives min_int/max_int in float64 arithmetic (pow, as numpy), an int64 one
//                 exactly (at most 62 bits), a float32 one in float32 (as before), all then widened exactly.
// These paths are scalar: such models are rare and the cost is the float64 arithmetic itself.
#pragma once
#include <cstdint>

#include "core/qonnx/quant.h"
#include "core/rounding.h"
#include "core/shape.h"

namespace ortquant::qonnx {

// A float32 or float64 operand.
struct WideOperand {
  const void* data = nullptr;
  bool f64 = false;
  double at(int64_t i) const {
    return f64 ? static_cast<const double*>(data)[i] : static_cast<double>(static_cast<const float*>(data)[i]);
  }
};

struct IntQuantBounds64 {
  double lo = 0.0;
  double hi = 0.0;
  bool bipolar = false;
};

// min_int/max_int of qonnx on a float64 bit width (float64 arithmetic) or an int64 one (exact, 1..62 bits).
// Throws Error for a bit width that is not finite and positive.
IntQuantBounds64 int_quant_bounds_f64(bool is_signed, bool narrow, double bitwidth);
IntQuantBounds64 int_quant_bounds_i64(bool is_signed, bool narrow, int64_t bitwidth);
// The float32-precision bounds widened exactly.
IntQuantBounds64 widen(const IntQuantBounds& b);
// Bounds for a float32 data path: each bound rounded to the nearest float32. Comparing a float32 value exactly
// with the wide bound and assigning the bound cast to float32 (what numpy does) equals clamping to the rounded
// bound.
IntQuantBounds narrow_to_f32(const IntQuantBounds64& b);

// Quant with X, scale, zeropt each float32 or float64 (at least one float64); float32 output.
void int_quant_wide(const BroadcastPlan& plan, WideOperand x, WideOperand s, WideOperand z, float* y, int64_t begin,
                    int64_t end, const IntQuantBounds64& b, RoundMode mode);

// BipolarQuant with X and scale each float32 or float64 (at least one float64); float32 output.
void bipolar_quant_wide(const BroadcastPlan& plan, WideOperand x, WideOperand s, float* y, int64_t begin,
                        int64_t end);

// MultiThreshold on float32 X with float64 thresholds: numpy compares the float32 value with the float64
// threshold exactly. The float32 threshold with the same outcome for every float32 x is the smallest float32 >=
// the threshold (round toward +inf; NaN stays NaN, above FLT_MAX gives +inf). n values, in place allowed.
void thresholds_to_f32(const double* t, float* out, int64_t n);
// int64 thresholds: numpy converts the int64 to float64 (nearest) for the comparison, then as above.
void thresholds_i64_to_f32(const int64_t* t, float* out, int64_t n);

}  // namespace ortquant::qonnx
