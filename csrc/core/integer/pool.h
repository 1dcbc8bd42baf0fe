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

// AvgPoolCodes: the mean of the float32 values v(c) that int8 codes c stand for (what their quantizer output:
// values[c + 128]), over windows kh x kw with strides sh x sw, no padding, floor rounding (oh = (h - kh) / sh + 1,
// ow likewise; h >= kh and w >= kw are the caller's to check): y = float32(double(sum of v over the window) / (kh *
// kw)). The float64 sum is exact (the values are multiples of the smallest one's ulp, and a window holds at most
// 2^20 of them), so y is the exact mean rounded to float64, then to float32. `scaled`: every v(c) equals
// (c + offset) * scale exactly (e.g. a power-of-two scale); the sum is then taken over the integers c + offset.
struct CodeValues {
  float values[256];  // v(c) at c + 128
  bool scaled = false;
  int32_t offset = 0;
  double scale = 1.0;
};
void avg_pool_codes(const int8_t* x, int64_t planes, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                    int64_t sw, const CodeValues& v, float* y);

}  // namespace ortquant::integer
