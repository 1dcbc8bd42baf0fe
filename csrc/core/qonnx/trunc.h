// QONNX Trunc / TruncQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 3, decision 6.
// One op, two forms chosen by the input count: 5 inputs = v1, 6 inputs = v2. float32 throughout, true division.
//
// v1 (X, scale, zeropt, in_bitwidth, out_bitwidth):
//   q = round_half_even(X / scale + zeropt)
//   q = round(q / 2^(in_bitwidth - out_bitwidth))          no clamping
//   y = (q - zeropt) * scale                                 the output keeps the input scale
//   With an int32 bit width numpy promotes 2^(in - out) to float64, so qonnx computes everything after the
//   first rounding in float64; we do the same and round the float64 result to float32 once (TruncParams::f64).
//
// v2 (X, scale, zeropt, in_bitwidth, out_scale, out_bitwidth), attributes signed, narrow:
//   t = 2^round_half_even(log2(out_scale / scale))           a power of two; in_bitwidth is not used
//   q = round_half_even(X / scale + zeropt) / t
//   q = min(q, max_int); q = max(q, min_int); q = round(q)   clamp before rounding, NaN passes
//   y = (q - zeropt / t) * out_scale
//   The exponent of t is the exact nearest integer to log2(out_scale / scale) (the ratio is rounded to float32
//   first, as numpy does). qonnx takes a float32 log2 first, so it can differ for ratios within a few ulps of
//   2^k * sqrt(2); for power-of-two ratios (what Brevitas exports) both are exact.
//
// Every parameter input broadcasts like numpy. Bit widths are float32, int32 or float16 and must be positive (and
// finite).
//
// float16 (qonnx does not cast Trunc's result: the output has numpy's dtype):
// - scale float16 (TruncParams::half): X, zeropt (v1: both bit widths; v2: out_scale) must be float16 too; every
//   step above runs in float16 (float32 operation rounded to float16), the output is float16. v2's out_bitwidth
//   may be float16 (bounds in float16 arithmetic), float32 or int32 (bounds rounded to float16, which is what
//   numpy's exact compare-and-assign of max_int.astype(float16) amounts to).
// - scale float32: numpy promotes every step to float32 (float64 after the first rounding with an int32 bit
//   width in v1), so X and the other parameters may be float16 or float32 and are converted exactly; a pair of
//   float16 bit widths in v1 gives 2^(in - out) in float16 arithmetic (2^16 and above are inf). Output float32.
#pragma once
#include <cstdint>
#include <vector>

#include "core/qonnx/params.h"
#include "core/rounding.h"

namespace ortquant::qonnx {

// Trunc's parameters expanded to their common broadcast shape (one array per quantity).
struct TruncParams {
  int version = 1;
  bool half = false;  // scale float16: the float16 pipeline; the arrays hold float16 values
  Shape shape;  // broadcast shape of the parameter inputs; the output shape is broadcast(X, shape)
  std::vector<float> scale, zeropt;
  // v1
  bool f64 = false;                 // an int32 bit width: the tail runs in float64 (see above)
  std::vector<float> trunc_scale;   // 2^(in_bitwidth - out_bitwidth), float32 path
  std::vector<double> trunc_scale64;  // the same in float64, f64 path
  // v2
  std::vector<float> t, lo, hi, out_zeropt, out_scale;
};

TruncParams trunc_v1_params(const NumTensor& scale, const NumTensor& zeropt, const NumTensor& in_bitwidth,
                            const NumTensor& out_bitwidth);
TruncParams trunc_v2_params(const NumTensor& scale, const NumTensor& zeropt, const NumTensor& out_scale,
                            const NumTensor& out_bitwidth, bool is_signed, bool narrow);

// 2^round_half_even(log2(ratio)) with the exponent computed exactly (float32 result; NaN for a negative or NaN
// ratio, 0 for a zero ratio, inf for an infinite one, as numpy's formula gives).
float trunc_power_of_two(float ratio);

// The flat output range [begin, end) of Trunc; plan over {shape of X, p.shape}.
void trunc(const BroadcastPlan& plan, const float* x, const TruncParams& p, float* y, int64_t begin, int64_t end,
           RoundMode mode);

// The same with X float32 or float16 (x16: IEEE binary16 bits). y is float16 when p.half (X must be float16
// then), float32 otherwise.
void trunc(const BroadcastPlan& plan, const void* x, bool x16, const TruncParams& p, void* y, int64_t begin,
           int64_t end, RoundMode mode);

}  // namespace ortquant::qonnx
