// Per-ISA entry points of the FloatQuant loop (see core/isa.h). Parameter pointers advance with stride ps.
#pragma once
#include <cstdint>

#include "core/isa.h"
#include "core/qonnx/float_quant.h"

namespace ortquant::qonnx {

struct FloatQuantRow {
  const float* s;
  const float* hi;
  const float* y_hi;
  const float* y_lo;
};

ORTQUANT_DECLARE_ISA_FN(void, float_quant_contiguous,
                        (const float* x, const FloatQuantRow& p, int64_t ps, float* y, int64_t n, int32_t mantissa,
                         int32_t emin, RoundMode mode, FloatOverflow overflow))
// float16 pipeline (FloatQuantParams::half): float16 X, float32 output.
ORTQUANT_DECLARE_ISA_FN(void, float_quant_half_contiguous,
                        (const uint16_t* x, const FloatQuantRow& p, int64_t ps, float* y, int64_t n, int32_t mantissa,
                         int32_t emin, RoundMode mode, FloatOverflow overflow))
// float16 X with float32 parameters: the float32 loop on X converted block by block.
ORTQUANT_DECLARE_ISA_FN(void, float_quant_x16_contiguous,
                        (const uint16_t* x, const FloatQuantRow& p, int64_t ps, float* y, int64_t n, int32_t mantissa,
                         int32_t emin, RoundMode mode, FloatOverflow overflow))

}  // namespace ortquant::qonnx
