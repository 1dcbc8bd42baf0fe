// Per-ISA entry points of the XnorPopcountMatMul loops (see core/isa.h). The AVX2/AVX-512 builds have the
// popcnt instruction; the scalar build uses the compiler's portable popcount.
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::qonnx {
// Packs k float values (0 or 1) into ceil(k/64) words; false if any value is neither 0 (either sign) nor 1.
ORTQUANT_DECLARE_ISA_FN(bool, pack_bits_row, (const float* row, int64_t k, uint64_t* out))
// y[j] = k - popcount(a XOR b_j) for the n rows b_j = b + j * words.
ORTQUANT_DECLARE_ISA_FN(void, xnor_popcount_row,
                        (const uint64_t* a, const uint64_t* b, int64_t n, int64_t words, int64_t k, float* y))
}  // namespace ortquant::qonnx
