// Per-ISA loops of the pools over codes (see core/isa.h): pool_impl.inc compiled three times (plain loops that the
// AVX2 and AVX-512 builds vectorize; the scalar build is the oracle).
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::integer {
// cols[t] = sum over r < rows of x[r * stride + t], t < w: the column sums of `rows` rows of int8 codes (exact:
// rows <= 2^20).
ORTQUANT_DECLARE_ISA_FN(void, code_col_sums_isa,
                        (const int8_t* x, int64_t rows, int64_t stride, int64_t w, int32_t* cols))
}  // namespace ortquant::integer
