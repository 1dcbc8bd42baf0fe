// The channels-last depthwise convolution, scalar oracle (dwnhwc.h): the same padded block (a band's rows of it)
// and packed weight pairs as the AVX2 path, plain loops, gemm::store_scalar for the epilogue.
#include <cstring>

#include "core/conv/dwnhwc.h"

namespace ortquant::conv::scalar {

void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch) {
  const ConvAttrs& a = d.a;
  const int64_t pairs = d.wts->pairs;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(d.ep->kind));
  int8_t* buf = scratch;
  int32_t* sums = reinterpret_cast<int32_t*>(scratch + dw_nhwc_sums_offset(d));
  for (int64_t t = t0; t < t1; ++t) {
    const DwUnit u = dw_nhwc_unit(d, t);
    const int64_t c0 = u.blk * kDwBlock, pr0 = u.y0 * a.sh, in_rows = dw_band_in_rows(d, u.y1 - u.y0);
    // Padded rows [pr0, pr0 + in_rows) of the NHWC block: zeros, then the input channels c0 .. c0+15 (missing
    // channels stay 0).
    std::memset(buf, 0, static_cast<size_t>(in_rows * d.wp * kDwBlock));
    for (int64_t ch = 0; ch < kDwBlock && c0 + ch < d.c; ++ch) {
      const int8_t* src = d.x + (u.img * d.c + c0 + ch) * d.h * d.w;
      for (int64_t i = 0; i < in_rows; ++i) {
        const int64_t y = pr0 + i - a.pt;
        if (y < 0 || y >= d.h) continue;
        for (int64_t x = 0; x < d.w; ++x) buf[(i * d.wp + x + a.pl) * kDwBlock + ch] = src[y * d.w + x];
      }
    }
    const int16_t* wb = d.wts->block(u.blk);
    for (int64_t ch = 0; ch < kDwBlock && c0 + ch < d.c; ++ch) {
      const int64_t oc = c0 + ch;
      const int32_t bias = d.ep->bias ? d.ep->bias[oc] : 0;
      for (int64_t oy = u.y0; oy < u.y1; ++oy) {
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          const int8_t* base = buf + ((oy * a.sh - pr0) * d.wp + ox * a.sw) * kDwBlock;
          int32_t s = 0;
          for (int64_t q = 0; q < pairs; ++q) {
            const int16_t* wq = wb + (q * kDwBlock + ch) * 2;
            s += base[d.tap_off[2 * q] + ch] * wq[0] + base[d.tap_off[2 * q + 1] + ch] * wq[1];
          }
          if (d.sink != nullptr) sums[(oy - u.y0) * d.ow + ox] = s;
          else
            gemm::store_scalar(*d.ep, s, bias, static_cast<char*>(d.out) + ((u.img * d.c + oc) * d.oh * d.ow) * es,
                               oy * d.ow + ox);
        }
      }
      if (d.sink != nullptr) (*d.sink)(u.img, oc, u.y0, u.y1, sums);
    }
  }
}

}  // namespace ortquant::conv::scalar
