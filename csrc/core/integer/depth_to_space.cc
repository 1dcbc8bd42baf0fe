#include "core/integer/depth_to_space.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ortquant::integer {

void depth_to_space(const float* x, int64_t c, int64_t h, int64_t w, int64_t bs, bool crd, float* y) {
  const int64_t cb = c / (bs * bs), ow = w * bs;
  for (int64_t k = 0; k < cb; ++k) {
    for (int64_t r = 0; r < h; ++r) {
      for (int64_t i = 0; i < bs; ++i) {
        float* out = y + (k * h * bs + r * bs + i) * ow;
        auto src = [&](int64_t j) {
          const int64_t ch = crd ? k * bs * bs + i * bs + j : (i * bs + j) * cb + k;
          return x + (ch * h + r) * w;
        };
        int64_t t = 0;
#if defined(__SSE2__)
        if (bs == 2) {  // the usual pixel shuffle: two source rows interleaved, 4 pixels of each per step
          const float *s0 = src(0), *s1 = src(1);
          for (; t + 4 <= w; t += 4) {
            const __m128 a = _mm_loadu_ps(s0 + t), b = _mm_loadu_ps(s1 + t);
            _mm_storeu_ps(out + 2 * t, _mm_unpacklo_ps(a, b));
            _mm_storeu_ps(out + 2 * t + 4, _mm_unpackhi_ps(a, b));
          }
        }
#endif
        for (int64_t j = 0; j < bs; ++j) {
          const float* s = src(j);
          for (int64_t p = t; p < w; ++p) out[p * bs + j] = s[p];
        }
      }
    }
  }
}

}  // namespace ortquant::integer
