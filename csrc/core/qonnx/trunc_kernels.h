// Per-ISA entry points of the Trunc loops (see core/isa.h). Parameter pointers advance with stride ps (0 or 1).
#pragma once
#include <cstdint>

#include "core/isa.h"
#include "core/qonnx/trunc.h"

namespace ortquant::qonnx {

struct TruncRow {
  const float* s;
  const float* z;
  const float* ts;     // v1 float32
  const double* ts64;  // v1 float64
  const float* t;      // v2 ...
  const float* lo;
  const float* hi;
  const float* oz;
  const float* os;
};

ORTQUANT_DECLARE_ISA_FN(void, trunc_v1_contiguous,
                        (const float* x, const TruncRow& p, int64_t ps, float* y, int64_t n, bool f64, RoundMode mode))
ORTQUANT_DECLARE_ISA_FN(void, trunc_v2_contiguous,
                        (const float* x, const TruncRow& p, int64_t ps, float* y, int64_t n, RoundMode mode))

}  // namespace ortquant::qonnx
