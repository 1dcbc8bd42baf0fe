// The channels-last depthwise convolution, scalar oracle (dwnhwc.h): the same padded block and packed weight
// pairs as the AVX2 path, plain loops, gemm::store_scalar for the epilogue.
#include <cstring>

#include "core/conv/dwnhwc.h"

namespace ortquant::conv::scalar {

void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch) {
  const ConvAttrs& a = d.a;
  const int64_t blocks = d.wts->blocks, pairs = d.wts->pairs;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(d.ep->kind));
  int8_t* buf = scratch;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t img = t / blocks, blk = t % blocks, c0 = blk * kDwBlock;
    // The padded NHWC block: zeros, then the input channels c0 .. c0+15 (missing channels stay 0).
    std::memset(buf, 0, static_cast<size_t>(d.hp * d.wp * kDwBlock));
    for (int64_t ch = 0; ch < kDwBlock && c0 + ch < d.c; ++ch) {
      const int8_t* src = d.x + (img * d.c + c0 + ch) * d.h * d.w;
      for (int64_t y = 0; y < d.h; ++y)
        for (int64_t x = 0; x < d.w; ++x) buf[((y + a.pt) * d.wp + x + a.pl) * kDwBlock + ch] = src[y * d.w + x];
    }
    const int16_t* wb = d.wts->block(blk);
    for (int64_t oy = 0; oy < d.oh; ++oy) {
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const int8_t* base = buf + (oy * a.sh * d.wp + ox * a.sw) * kDwBlock;
        for (int64_t ch = 0; ch < kDwBlock && c0 + ch < d.c; ++ch) {
          int32_t s = 0;
          for (int64_t q = 0; q < pairs; ++q) {
            const int16_t* wq = wb + (q * kDwBlock + ch) * 2;
            s += base[d.tap_off[2 * q] + ch] * wq[0] + base[d.tap_off[2 * q + 1] + ch] * wq[1];
          }
          const int64_t oc = c0 + ch;
          const int32_t bias = d.ep->bias ? d.ep->bias[oc] : 0;
          gemm::store_scalar(*d.ep, s, bias, static_cast<char*>(d.out) + ((img * d.c + oc) * d.oh * d.ow) * es,
                             oy * d.ow + ox);
        }
      }
    }
  }
}

}  // namespace ortquant::conv::scalar
