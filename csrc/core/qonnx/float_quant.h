// QONNX FloatQuant (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 4, decision 7.
// Minifloat quantize-dequantize with E exponent bits, M mantissa bits, exponent bias B, always signed:
//   v = X / scale                                                      float32, true division
//   e = max(floor(log2(|v| + FLT_MIN)) - M, 1 - B - M); s = 2^e        the subnormal grid is always used
//   q = s * round(v / s)
//   maxv = min((2 - 2^-M) * 2^(2^E - 1 - B), max_val)                  float64, as numpy computes it
//   saturation=1: q = clip(q, -maxv, maxv)
//   saturation=0: values beyond +-maxv become +-inf (has_inf) or NaN (has_nan; q = +-inf also NaN)
//   signed zeros as np.clip gives them: a one-element max_val keeps a zero q's sign, a larger one makes every q
//   (but NaN) equal to a maxv of +-0
//   y = q * scale                                                      float64 product rounded to float32
// floor(log2(.)) is the exact binary exponent of the float32 |v| + FLT_MIN (decision 7). qonnx uses a float32
// log2, which rounds up to the next integer for values up to 44 ulps below a power of two (1 ulp near 2^3,
// more for larger exponents); there (only) its step is twice ours. That changes the result where the rounding
// goes toward zero (FLOOR on positive v, CEIL on negative v, DOWN), for the nearest modes only when M >= 17,
// and for M = 0 just below 2^128 (qonnx's step becomes inf there and gives NaN).
// +-inf input gives NaN (inf/inf inside the rounding step), NaN gives NaN, as in qonnx.
// scale and max_val broadcast like numpy; exponent_bitwidth, mantissa_bitwidth and exponent_bias must each have
// one element (qonnx needs a scalar mantissa width) and be integers. has_subnormal is ignored, as in qonnx.
//
// float16 (the output is float32 in every case: qonnx casts its result):
// - scale float16 (FloatQuantParams::half): X and every other parameter must be float16 too. The steps up to q run
//   in float16 as numpy does (each float32 operation rounded to float16): v = X / scale, |v| + tiny with
//   float16's tiny 2^-14, e against 1 - B - M, s = 2^e in float16 (0 for e <= -25, inf for e >= 16), v / s,
//   the rounding (HALF_UP/HALF_DOWN in float16), s * that. The exponent of |v| + tiny stays exact (decision 7).
//   The formula max uses float16 arithmetic for 2^E - 1 - B and its power of two (inf from 2^16: E5M2's formula
//   max is inf, so max_val decides). The clip and the product with the scale are exact, as in float64.
// - scale float32: numpy promotes to float32 at v = X / scale, so X (and max_val) may be float16, converted
//   exactly; the float32 formula follows. E and B both float16 give the formula max in float16 arithmetic.
// float64 / int32 / int64 inputs: float_quant_wide in core/qonnx/wide_params.h (a scalar loop, numpy's dtypes).
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
  bool half = false;  // scale float16: the float16 pipeline (X must be float16)
  // Per element, only when max_val has several elements and some maxv is +-0 (else empty): numpy's clip with
  // bounds of several elements returns the bound on a tie, so there every q but NaN becomes maxv (also a zero q,
  // which the loops' one-element rule keeps); float_quant() patches those outputs afterwards.
  std::vector<uint8_t> zero_bound;
};

FloatQuantParams float_quant_params(const NumTensor& scale, const NumTensor& exponent_bitwidth,
                                    const NumTensor& mantissa_bitwidth, const NumTensor& exponent_bias,
                                    const NumTensor& max_val);

// qonnx's formula max (2 - 2^-M) * 2^(2^E - 1 - B) for integer E, M, B, in float64 as numpy computes it.
double float_quant_formula_max(int32_t exponent_bits, int32_t mantissa_bits, int32_t bias);

// The same computed as numpy does on float16 E and B: 2^E - 1 - B and its power of two in float16 arithmetic.
double float_quant_formula_max_half(int32_t exponent_bits, int32_t mantissa_bits, int32_t bias);

// The flat output range [begin, end) of FloatQuant; plan over {shape of X, p.shape}.
void float_quant(const BroadcastPlan& plan, const float* x, const FloatQuantParams& p, float* y, int64_t begin,
                 int64_t end, RoundMode mode, FloatOverflow overflow);

// The same with X float32 or float16 (x16: IEEE binary16 bits); X must be float16 when p.half.
void float_quant(const BroadcastPlan& plan, const void* x, bool x16, const FloatQuantParams& p, float* y,
                 int64_t begin, int64_t end, RoundMode mode, FloatOverflow overflow);

}  // namespace ortquant::qonnx
