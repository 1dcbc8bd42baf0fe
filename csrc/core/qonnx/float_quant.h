// QONNX FloatQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 4, decision 7.
// Minifloat quantize-dequantize with E exponent bits, M mantissa bits, exponent bias B, always signed:
//   v = X / scale                                                      float32, true division
//   e = max(floor(log2(|v| + FLT_MIN)) - M, 1 - B - M); s = 2^e        the subnormal grid is always used
//   q = s * round(v / s)
//   maxv = min((2 - 2^-M) * 2^(2^E - 1 - B), max_val)                  float64, as numpy computes it
//   saturation=1: q = clip(q, -maxv, maxv)
//   saturation=0: values beyond +-maxv become +-inf (has_inf) or NaN (has_nan; q = +-inf also NaN)
//   y = q * scale                                                      float64 product rounded to float32
// floor(log2(.)) is the exact binary exponent of the float32 |v| + FLT_MIN (decision 7). qonnx uses a float32
// log2, which rounds up to the next integer for values up to 44 ulps below a power of two (1 ulp near 2^3,
// more for larger exponents); there (only) its step is twice ours. That changes the result where the rounding
// goes toward zero (FLOOR on positive v, CEIL on negative v, DOWN), for the nearest modes only when M >= 17,
// and for M = 0 just below 2^128 (qonnx's step becomes inf there and gives NaN).
// +-inf input gives NaN (inf/inf inside the rounding step), NaN gives NaN, as in qonnx.
// scale and max_val broadcast like numpy; exponent_bitwidth, mantissa_bitwidth and exponent_bias must each have
// one element (qonnx needs a scalar mantissa width) and be integers. has_subnormal is ignored, as in qonnx.
#pragma once
#include <cstdint>
#include <vector>

#include "core/qonnx/params.h"
#include "core/rounding.h"

namespace ortquant::qonnx {

enum class FloatOverflow : uint8_t { kSaturate = 0, kInf, kNan };

// saturation=1 -> kSaturate; else has_inf -> kInf, else has_nan -> kNan; saturation=0 with neither is an error.
FloatOverflow float_quant_overflow(bool saturation, bool has_inf, bool has_nan);

// FloatQuant's parameters expanded to their common broadcast shape.
struct FloatQuantParams {
  Shape shape;  // broadcast shape of every parameter input; the output shape is broadcast(X, shape)
  int32_t mantissa = 0;  // M
  int32_t emin = 0;      // 1 - B - M (the subnormal step's exponent), clamped to [-190, 128]
  // Per element: scale (NaN where maxv is NaN: numpy's clip then makes everything NaN), the largest float32 <=
  // maxv (compare bound), and the outputs of a value clipped to +maxv and to -maxv (float64 products rounded).
  std::vector<float> scale, hi, y_hi, y_lo;
};

FloatQuantParams float_quant_params(const NumTensor& scale, const NumTensor& exponent_bitwidth,
                                    const NumTensor& mantissa_bitwidth, const NumTensor& exponent_bias,
                                    const NumTensor& max_val);

// qonnx's formula max (2 - 2^-M) * 2^(2^E - 1 - B) for integer E, M, B, in float64 as numpy computes it.
double float_quant_formula_max(int32_t exponent_bits, int32_t mantissa_bits, int32_t bias);

// The flat output range [begin, end) of FloatQuant; plan over {shape of X, p.shape}.
void float_quant(const BroadcastPlan& plan, const float* x, const FloatQuantParams& p, float* y, int64_t begin,
                 int64_t end, RoundMode mode, FloatOverflow overflow);

}  // namespace ortquant::qonnx
