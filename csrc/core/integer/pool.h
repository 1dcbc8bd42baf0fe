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

}  // namespace ortquant::integer
