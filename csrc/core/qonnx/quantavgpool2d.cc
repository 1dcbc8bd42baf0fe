#include "core/qonnx/quantavgpool2d.h"

#include <algorithm>

#include "core/error.h"
#include "core/qonnx/quantavgpool2d_kernels.h"

namespace ortquant::qonnx {

int quant_avgpool_shift(int64_t ibits, int64_t obits, int64_t kernel) {
  if (ibits < 1 || ibits > 64) throw_error("attribute 'ibits' must be in [1, 64], got ", ibits);
  if (obits < 1 || obits > 64) throw_error("attribute 'obits' must be in [1, 64], got ", obits);
  if (kernel < 1 || kernel > 65535) throw_error("attribute 'kernel' must be in [1, 65535], got ", kernel);
  // bit_length((2^ibits - 1) * kernel^2) without overflow: 128-bit product (< 2^96).
  __extension__ typedef unsigned __int128 u128;
  const u128 max_value = ((u128{1} << ibits) - 1) * static_cast<u128>(kernel * kernel);
  int bits = 0;
  for (u128 v = max_value; v != 0; v >>= 1) ++bits;
  return bits > obits ? static_cast<int>(bits - obits) : 0;
}

void quant_avgpool_nchw(const float* x, float* y, const Pool2dDims& d, const QuantAvgPoolParams& p, float* scratch,
                        int64_t r0, int64_t r1) {
  auto acc = select_isa(&scalar::avgpool_accumulate, &avx2::avgpool_accumulate, &avx512::avgpool_accumulate);
  auto finish = select_isa(&scalar::avgpool_finish, &avx2::avgpool_finish, &avx512::avgpool_finish);
  const float kk = static_cast<float>(p.kernel * p.kernel);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t plane = r / d.oh;  // n * C + c
    const int64_t i = r % d.oh;
    const float* xp = x + plane * d.h * d.w;
    std::fill(scratch, scratch + d.ow, 0.f);
    for (int64_t a = 0; a < p.kernel; ++a) {
      const float* row = xp + (i * p.stride + a) * d.w;
      for (int64_t b = 0; b < p.kernel; ++b) acc(scratch, row + b, d.ow, p.stride);
    }
    finish(scratch, y + r * d.ow, d.ow, kk, p.shift);
  }
}

void quant_avgpool_nhwc(const float* x, float* y, const Pool2dDims& d, const QuantAvgPoolParams& p, int64_t r0,
                        int64_t r1) {
  auto acc = select_isa(&scalar::avgpool_accumulate, &avx2::avgpool_accumulate, &avx512::avgpool_accumulate);
  auto finish = select_isa(&scalar::avgpool_finish, &avx2::avgpool_finish, &avx512::avgpool_finish);
  const float kk = static_cast<float>(p.kernel * p.kernel);
  const int64_t c = d.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / (d.oh * d.ow);
    const int64_t i = (r / d.ow) % d.oh;
    const int64_t j = r % d.ow;
    const float* xn = x + n * d.h * d.w * c;
    float* s = y + r * c;  // the sums live in the output row until finished in place
    std::fill(s, s + c, 0.f);
    for (int64_t a = 0; a < p.kernel; ++a)
      for (int64_t b = 0; b < p.kernel; ++b) acc(s, xn + ((i * p.stride + a) * d.w + j * p.stride + b) * c, c, 1);
    finish(s, s, c, kk, p.shift);
  }
}

}  // namespace ortquant::qonnx
