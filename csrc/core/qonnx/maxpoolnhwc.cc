#include "core/qonnx/maxpoolnhwc.h"

#include <algorithm>
#include <limits>

#include "core/qonnx/maxpoolnhwc_kernels.h"

namespace ortquant::qonnx {

void maxpool_nhwc(const float* x, float* y, const Pool2dDims& d, const Pool2dParams& p, int64_t r0, int64_t r1) {
  auto acc = select_isa(&scalar::max_accumulate, &avx2::max_accumulate, &avx512::max_accumulate);
  const int64_t c = d.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / (d.oh * d.ow);
    const int64_t i = (r / d.ow) % d.oh;
    const int64_t j = r % d.ow;
    int64_t h0, h1, w0, w1;
    pool_window(i, p.stride_h, p.pad_top, p.kernel_h, d.h, &h0, &h1);
    pool_window(j, p.stride_w, p.pad_left, p.kernel_w, d.w, &w0, &w1);
    float* m = y + r * c;
    std::fill(m, m + c, -std::numeric_limits<float>::infinity());
    const float* xn = x + n * d.h * d.w * c;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) acc(m, xn + (ih * d.w + iw) * c, c);
  }
}

}  // namespace ortquant::qonnx
