// Per-ISA loops of the integer-mode layers (see core/isa.h): qlayer_impl.inc compiled three times.
#pragma once
#include <cstdint>

#include "core/integer/qlayer.h"
#include "core/isa.h"

namespace ortquant::integer {
ORTQUANT_DECLARE_ISA_FN(void, quantize_codes_isa, (const ActQuant& a, const float* x, int8_t* codes, int64_t n))
ORTQUANT_DECLARE_ISA_FN(void, quantize_codes_grid_isa,
                        (const ActQuant& a, const float* x, int64_t row_stride, int64_t col_step, int64_t rows,
                         int64_t cols, int8_t* codes))
ORTQUANT_DECLARE_ISA_FN(void, rescale_isa,
                        (const int32_t* acc, float* out, int64_t outer, int64_t channels, int64_t inner,
                         const int64_t* corr, const double* s, const double* b, bool relu))
ORTQUANT_DECLARE_ISA_FN(void, rescale_grid_isa,
                        (const int32_t* acc, int64_t stride, float* out, int64_t channels, int64_t rows,
                         int64_t width, const int64_t* corr, const double* s, const double* b, bool relu))
ORTQUANT_DECLARE_ISA_FN(void, rescale_rows_exact32_isa,
                        (const int32_t* acc, float* out, int64_t rows, int64_t n, const int32_t* c, const float* s,
                         const float* b, bool relu))
// rescale_grid_isa's layout for channels whose Exact32 (qlayer.h) is ok: out[(j * rows + r) * width + p] =
// fma(float32(acc[(j * rows + r) * stride + p] + e[j].c), e[j].s, e[j].b), then with relu y < 0 ? 0 : y; the same
// bits as the float64 formula.
ORTQUANT_DECLARE_ISA_FN(void, rescale_grid_exact32_isa,
                        (const int32_t* acc, int64_t stride, float* out, int64_t channels, int64_t rows,
                         int64_t width, const Exact32* e, bool relu))
// The codes of a RawSink grid's rescaled values: codes[(j * rows + r) * width + p] = quantize_codes(q, y) of
// y = float32(double(acc[(j * rows + r) * stride + p] + corr[j]) * s[j] + b[j]) (then leaky: y >= 0 ? y :
// float32(*leaky * y); resid: y = float32(y + resid[same index as the code]); relu: y < 0 ? 0 : y), without storing
// y: a vector loop on fast[j] (CodesFast), the exact formula for every group of 8 values one of which lies near a
// rounding boundary. Same bits as the rescale then quantize_codes. Returns false, doing nothing, where the path has no
// vector loop (scalar) or for a LeakyRelu with a residual; q must be an int8 quantizer (not wide, not bipolar).
ORTQUANT_DECLARE_ISA_FN(bool, rescale_codes_isa,
                        (const int32_t* acc, int64_t stride, int8_t* codes, int64_t channels, int64_t rows,
                         int64_t width, const int64_t* corr, const double* s, const double* b, bool relu,
                         const float* leaky, const float* resid, const ActQuant& q, const CodesFast* fast))
// rescale_codes_rows' vector loop (8 channels of a row per step, codes_near's arithmetic per value, the exact
// formula for a step with a value near a rounding boundary). Returns false, doing nothing, on the scalar path.
ORTQUANT_DECLARE_ISA_FN(bool, rescale_codes_rows_isa,
                        (const int32_t* acc, int64_t rows, int64_t n, int8_t* codes, const int64_t* corr,
                         const double* s, const double* b, bool relu, const ActQuant& q, const CodesFastRows& f))
// A 1x1 convolution with few input channels, straight: acc[j * ld + p] = sum_c w[j * k + c] * x[c * plane + p] for
// j < m, p < n (int32, exact: |sum| <= k * 128 * 128). The vector paths add 16 pixels per vector in int16 for the
// outputs whose 128 * sum_c |w[j * k + c]| <= 32767 (every partial sum fits), the others in int32.
ORTQUANT_DECLARE_ISA_FN(void, small_k_sums_isa,
                        (const int8_t* x, int64_t plane, int64_t k, const int8_t* w, int64_t m, int64_t n, int32_t* acc,
                         int64_t ld))
// QConv's w_shift: dst[r * width + x] = src[r * stride + x] + d * t[r * width + x], modulo 2^32, r < rows, x < width.
ORTQUANT_DECLARE_ISA_FN(void, add_shifted_sums_isa,
                        (const int32_t* src, int64_t stride, int32_t* dst, int64_t rows, int64_t width, uint32_t d,
                         const int32_t* t))
// QConv's w_shift: the window sums of one image's group of `channels` code planes [h][w] (plane elements apart),
// modulo 2^32, a tap off the image counting as `pad`: u (h x w) gets the channels' sum per pixel, rows (h x ow) its
// sums over the kw taps of each output column, t[oy * ow + ox] the sum of rows over the kh taps of each output row.
ORTQUANT_DECLARE_ISA_FN(void, window_code_sums_isa,
                        (const int8_t* codes, int64_t plane, int64_t channels, int64_t h, int64_t w, int64_t pt,
                         int64_t pl, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                         uint32_t pad, uint32_t* u, uint32_t* rows, int32_t* t, int64_t oh, int64_t ow))
// y[i] = float32(codes[i] + offset) * scale (dequantize_codes' loop).
ORTQUANT_DECLARE_ISA_FN(void, dequantize_codes_isa, (const int8_t* codes, int32_t offset, float scale, float* y, int64_t n))
// ONNX LeakyRelu in place, as onnxruntime computes it: y[i] = y[i] >= 0 ? y[i] : alpha * y[i] (float32).
ORTQUANT_DECLARE_ISA_FN(void, leaky_relu_isa, (float* y, int64_t n, float alpha))
// dst[i * m + j] = buf[j * ld + i] for j < channels, i < n: a [channels][ld] block of planar values stored as n
// pixels of a channels-last tensor whose pixels are m values apart (16 x 16 transposes on AVX-512 and 8 x 8 ones on
// AVX2 for 16 / 8 channels at a time, an interleave for a pair making whole pixels). stream: a large output, whose
// whole 64-byte lines (16 channels at a 64-byte aligned place, m a multiple of 16) the AVX-512 path writes with
// non-temporal stores (no read of each line before it is written; an sfence after them); the values are the same.
ORTQUANT_DECLARE_ISA_FN(void, store_channels_last_isa,
                        (const float* buf, int64_t ld, int64_t channels, int64_t n, float* dst, int64_t m,
                         bool stream))
// codes[i] = t16[codes[i]] for codes in [0, 15] (the caller's to ensure): one vpshufb per 32 codes on AVX2.
ORTQUANT_DECLARE_ISA_FN(void, map_codes16_isa, (const int8_t* t16, int8_t* codes, int64_t n))
ORTQUANT_DECLARE_ISA_FN(void, quantize_wide_isa, (const ActQuant& a, const float* x, int8_t* planes, int64_t n))
ORTQUANT_DECLARE_ISA_FN(void, rescale_wide_isa,
                        (const int32_t* acc, int nplanes, int64_t plane_stride, float* out, int64_t outer,
                         int64_t channels, int64_t inner, const int64_t* corr, const double* s, const double* b,
                         bool relu))
ORTQUANT_DECLARE_ISA_FN(void, quantize_values_isa, (const ActQuant& a, const float* x, float* v, int64_t n))
ORTQUANT_DECLARE_ISA_FN(void, rescale_f32_isa,
                        (const float* acc, float* out, int64_t outer, int64_t channels, int64_t inner,
                         const int64_t* corr, const double* s, const double* b, bool relu))
}  // namespace ortquant::integer
