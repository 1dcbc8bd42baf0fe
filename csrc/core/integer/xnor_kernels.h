// Per-ISA loops of the XNOR-popcount layers (see core/isa.h): xnor_impl.inc compiled three times. The AVX2 and
// AVX-512 builds use the popcnt instruction; the scalar build the compiler's portable popcount.
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::integer {
// Bits of the bipolar quantizer (bit = x / s + z >= 0, float32 IEEE steps, NaN -> 0), as xnor.h's
// xnor_pack_rows / xnor_pack_pixels; `signs` is scratch of channels * pixels bytes.
ORTQUANT_DECLARE_ISA_FN(void, xnor_pack_rows_isa,
                        (const float* x, int64_t rows, int64_t k, float s, float z, uint64_t* out))
ORTQUANT_DECLARE_ISA_FN(void, xnor_pack_pixels_isa,
                        (const float* x, int64_t channels, int64_t pixels, float s, float z, uint8_t* signs,
                         uint64_t* out))
// out[r * out_stride] = base - 2 * sum over i < kwords of popcount(x[i] XOR row r's word i), r < rows, the rows
// in blocks of 8 with interleaved words (xnor.h, XnorWeights).
ORTQUANT_DECLARE_ISA_FN(void, xnor_dot_isa,
                        (const uint64_t* x, int64_t kwords, const uint64_t* w, int64_t rows, int32_t base,
                         int32_t* out, int64_t out_stride))
// Bit plane `plane` of int8 activation codes (codes >= 0): per pixel (like xnor_pack_pixels_isa, `bits` is scratch
// of channels * pixels bytes) or per row.
ORTQUANT_DECLARE_ISA_FN(void, plane_pack_pixels_isa,
                        (const int8_t* codes, int64_t channels, int64_t pixels, int plane, uint8_t* bits,
                         uint64_t* out))
ORTQUANT_DECLARE_ISA_FN(void, plane_pack_rows_isa,
                        (const int8_t* codes, int64_t rows, int64_t k, int plane, uint64_t* out))
// out[r * out_stride] = sum over planes b of 2^b * (2 popcount(X_b AND row r) - popcount(X_b)), X_b = x + b *
// plane_stride (kwords words each), r < rows, the rows in blocks as for xnor_dot_isa.
ORTQUANT_DECLARE_ISA_FN(void, plane_dot_isa,
                        (const uint64_t* x, int planes, int64_t plane_stride, int64_t kwords, const uint64_t* w,
                         int64_t rows, int32_t* out, int64_t out_stride))
}  // namespace ortquant::integer
