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
//   FloatQuant:   see float_quant_wide below.
// Every QKeras/hls4ml conversion has such an activation quantizer (44 of the 94 public models): Quant's row loop
// for float32 X with a scale and zero point constant along the row hoists them, divides by a power-of-two scale
// as a multiplication with its exact reciprocal and rounds ROUND without a library call, so it vectorizes; the
// other cases and ops run the general scalar loop.
#pragma once
#include <cstdint>
#include <vector>

#include "core/qonnx/float_quant.h"
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

// A float32, float64, int32 or int64 tensor of the float64-parameter Trunc path.
struct WideTensor {
  enum Kind : uint8_t { kF32, kF64, kI32, kI64 };
  const void* data = nullptr;
  Kind kind = kF32;
  Shape shape;
  bool f64() const { return kind == kF64; }
  bool is_int() const { return kind == kI32 || kind == kI64; }
  double at(int64_t i) const {
    switch (kind) {
      case kF32: return static_cast<const float*>(data)[i];
      case kF64: return static_cast<const double*>(data)[i];
      case kI32: return static_cast<const int32_t*>(data)[i];
      default: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    }
  }
  int64_t i64(int64_t i) const {
    return kind == kI32 ? static_cast<const int32_t*>(data)[i] : static_cast<const int64_t*>(data)[i];
  }
};

// Trunc with any float64 / int64 input (X, scale, zeropt, bit widths, out_scale); float32 output. Each step of
// qonnx's trunc_v1 / trunc_v2 runs in the dtype numpy gives it (float32 only while every operand so far is
// float32; an int bit width mixed with a float promotes to float64), the rounding modes with their formulas in that
// precision, the clamp compares exactly and assigns the bound rounded to the step's precision, v2's exponent is
// the exact nearest integer to log2(out_scale / scale) (as the float32 path, decision 6). `out_bw` is null for v1
// (then in_bw and in4 = out_bitwidth are used), set for v2 (in4 = out_scale, in_bw unused). Throws Error for bit
// widths that are not finite and positive (v2: an integer one above 62). `y` has shape `out` (the broadcast shape).
void trunc_wide(const WideTensor& x, const WideTensor& s, const WideTensor& z, const WideTensor& in_bw,
                const WideTensor& in4, const WideTensor* out_bw, bool is_signed, bool narrow, RoundMode mode,
                const Shape& out, float* y);

// FloatQuant with any float64 / int32 / int64 input (X float32 or float64; scale, exponent_bitwidth,
// mantissa_bitwidth, exponent_bias, max_val each float32, float64, int32 or int64). numpy's dtypes in qonnx's
// float_quant (an int array mixed with a float32 one promotes to float64, like a float64 array):
//   v = X / scale                      float32 when X and scale are float32, else float64 (call it d1)
//   a = |v| + finfo(d1).tiny           FLT_MIN or DBL_MIN, in d1
//   e = max(floor(log2(a)) - M, 1 - B - M)       integers; the exponent of a is exact (decision 7)
//   s = 2^e; q = s * round(v / s)      float32 when d1, M and B are all float32 (the grid dtype), else float64:
//                                      0 for e <= -150 / -1075, inf for e >= 128 / 1024
//   formula = (2 - 2^-M) * 2^(2^E - 1 - B)    2^E - 1 in E's dtype, - B and the power in float32 only when E
//                                      and B are float32 (else float64); the product in float64
//   maxv = np.minimum(formula, max_val)       float64 (max_val on a tie, NaN propagates)
//   clip(q, -maxv, maxv) in float64 with numpy's rules for signed zeros (one rule for a one-element max_val,
//   another for a larger one; see the .cc), the saturation=0 masks computed on q before the clip,
//   Y = float32(clipped * scale) (the product in float64).
struct FloatQuantWideFormat {
  int32_t mantissa = 0;   // M
  int32_t emin = 0;       // 1 - B - M, clamped to [-1100, 1100] (2^e is 0 or inf beyond, in either dtype)
  double formula = 0.0;   // qonnx's compute_max_val in numpy's dtypes
  bool grid_f32 = false;  // M and B float32: the grid is float32 when X and scale are float32 too
};

// Validates exponent_bitwidth, mantissa_bitwidth and exponent_bias (one integer element each: E in [0, 64],
// M in [0, 52], |B| <= 2^24, as on the float32 path) and computes the format. Throws Error naming the input.
FloatQuantWideFormat float_quant_wide_format(const WideTensor& e_bits, const WideTensor& m_bits,
                                             const WideTensor& bias);

// The flat output range [begin, end) of FloatQuant on wide inputs; plan over {shape of X, of scale, of max_val}.
// x is float32 or float64 (an integer X is refused by the kernel); float32 output.
void float_quant_wide(const BroadcastPlan& plan, const WideTensor& x, const WideTensor& s, const WideTensor& max_val,
                      const FloatQuantWideFormat& f, float* y, int64_t begin, int64_t end, RoundMode mode,
                      FloatOverflow overflow);

}  // namespace ortquant::qonnx
