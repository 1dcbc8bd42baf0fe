// Integer mode's fused max pool (QConv's `pool` attribute): a MaxPool with kernel == strides, no pads, no
// dilation and floor rounding over a QConv output, applied to each image's float output while it is in cache.
#pragma once
#include <cstdint>

namespace ortquant::integer {

// y[p][i][j] = max over x[p][i * ph + a][j * pw + b], a < ph, b < pw, for p < planes, i < h / ph, j < w / pw
// (rows and columns past the last whole window are dropped, as MaxPool's floor rounding does). The values are
// QConv outputs (never NaN). On x86-64 the 2-wide windows take an SSE2 loop unless the active ISA path is "scalar";
// both give the same bits. ph, pw >= 1; h >= ph and w >= pw are the caller's to check.
void max_pool_windows(const float* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, float* y);
// The same windows over int8 codes (MaxPoolCodes: the max of codes is the code of the max, a quantizer being
// non-decreasing). On x86-64 the 2-wide windows take an SSE2 loop unless the active ISA path is "scalar".
void max_pool_windows(const int8_t* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, int8_t* y);

// AvgPoolCodes: the mean of the values int8 codes c stand for, (c + offset) * scale (the quantizer's real values
// s * (q - z), c + offset being q - z), over windows kh x kw with strides sh x sw, no padding, floor rounding
// (oh = (h - kh) / sh + 1, ow likewise; h >= kh and w >= kw are the caller's to check):
// y = float32(double(sum of (c + offset) over the window) * scale / (kh * kw)). The integer sum and its product
// with the float32 scale are exact (|sum| < 2^28 for windows of at most 2^20 codes), so y is the exact mean rounded
// to float64, then to float32. The column sums run on the active ISA path (pool_kernels.h).
void avg_pool_codes(const int8_t* x, int64_t planes, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                    int64_t sw, int32_t offset, float scale, float* y);

}  // namespace ortquant::integer
