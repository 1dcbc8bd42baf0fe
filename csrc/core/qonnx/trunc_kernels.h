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

// The row k elements further on (parameter pointers that are set advance by k).
inline TruncRow trunc_row_advance(TruncRow r, int64_t k) {
  for (const float** q : {&r.s, &r.z, &r.ts, &r.t, &r.lo, &r.hi, &r.oz, &r.os})
    if (*q) *q += k;
  if (r.ts64) r.ts64 += k;
  return r;
}

ORTQUANT_DECLARE_ISA_FN(void, trunc_v1_contiguous,
                        (const float* x, const TruncRow& p, int64_t ps, float* y, int64_t n, bool f64, RoundMode mode))
ORTQUANT_DECLARE_ISA_FN(void, trunc_v2_contiguous,
                        (const float* x, const TruncRow& p, int64_t ps, float* y, int64_t n, RoundMode mode))
// float16 pipeline (TruncParams::half): float16 X and output, version 1 or 2.
ORTQUANT_DECLARE_ISA_FN(void, trunc_half_contiguous,
                        (const uint16_t* x, const TruncRow& p, int64_t ps, uint16_t* y, int64_t n, int version,
                         RoundMode mode))
// float16 X with float32 parameters: the float32 loops on X converted block by block.
ORTQUANT_DECLARE_ISA_FN(void, trunc_x16_contiguous,
                        (const uint16_t* x, const TruncRow& p, int64_t ps, float* y, int64_t n, int version, bool f64,
                         RoundMode mode))

}  // namespace ortquant::qonnx
