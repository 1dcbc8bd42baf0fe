// Per-ISA entry points of the Quant loops (see core/isa.h).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/isa.h"
#include "core/qonnx/quant.h"

namespace ortquant::qonnx {

// True when x / s equals x * r (r = 1 / s) bit for bit for every float x, and sets r: s = +-2^k with s and 1/s
// both normal (|s| in [2^-126, 2^126]). 1/s is then exact, x / s and x * r are the correctly rounded value of
// the same real number x * 2^-k (same rounding, same sign of zero, same inf/NaN results), and the
// denormals-are-zero / flush-to-zero modes treat both forms alike since neither s nor r is subnormal.
inline bool exact_reciprocal(float s, float* r) {
  uint32_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  const uint32_t mantissa = bits & 0x7fffffu;
  if (mantissa != 0 || exponent < 1 || exponent > 253) return false;
  *r = 1.0f / s;
  return true;
}

ORTQUANT_DECLARE_ISA_FN(void, int_quant_contiguous,
                        (const float* x, const float* s, int64_t ss, const float* z, int64_t zs, float* y, int64_t n,
                         const IntQuantBounds& b, RoundMode mode))
// X (contiguous), scale and zeropt (strides ss, zs: 0 or 1) each float32 or float16; see int_quant_mixed.
ORTQUANT_DECLARE_ISA_FN(void, int_quant_mixed_contiguous,
                        (const QuantOperand& x, const QuantOperand& s, int64_t ss, const QuantOperand& z, int64_t zs,
                         float* y, int64_t n, const IntQuantBounds& b, RoundMode mode))
}  // namespace ortquant::qonnx
