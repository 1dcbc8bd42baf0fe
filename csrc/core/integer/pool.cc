#include "core/integer/pool.h"

#include "core/cpu.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ortquant::integer {
namespace {

// One output row: the max of window rows r[0 .. ph) (each w floats) over column windows of pw.
void pool_row_scalar(const float* const* r, int64_t ph, int64_t ow, int64_t pw, float* y, int64_t j0) {
  for (int64_t j = j0; j < ow; ++j) {
    float m = r[0][j * pw];
    for (int64_t a = 0; a < ph; ++a)
      for (int64_t b = 0; b < pw; ++b) {
        const float v = r[a][j * pw + b];
        m = v > m ? v : m;
      }
    y[j] = m;
  }
}

#if defined(__SSE2__)
// pw == 2: 4 outputs per step from 8 floats of each window row (vertical max, then the max of each column pair).
// maxps returns its second operand when the first is not greater: the same value as the scalar loop for non-NaN
// inputs (a +0 / -0 pair may come out with either sign, which compares equal).
int64_t pool_row_w2_sse2(const float* const* r, int64_t ph, int64_t ow, float* y) {
  int64_t j = 0;
  for (; j + 4 <= ow; j += 4) {
    __m128 lo = _mm_loadu_ps(r[0] + 2 * j), hi = _mm_loadu_ps(r[0] + 2 * j + 4);
    for (int64_t a = 1; a < ph; ++a) {
      lo = _mm_max_ps(lo, _mm_loadu_ps(r[a] + 2 * j));
      hi = _mm_max_ps(hi, _mm_loadu_ps(r[a] + 2 * j + 4));
    }
    const __m128 even = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 odd = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    _mm_storeu_ps(y + j, _mm_max_ps(even, odd));
  }
  return j;
}
#endif

}  // namespace

void max_pool_windows(const float* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, float* y) {
  const int64_t oh = h / ph, ow = w / pw;
  const bool vector = pw == 2 && ph <= 8 && active_isa() != Isa::kScalar;
  const float* rows[8];
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * h * w;
    for (int64_t i = 0; i < oh; ++i) {
      float* yr = y + (p * oh + i) * ow;
      int64_t j0 = 0;
      if (ph <= 8) {
        for (int64_t a = 0; a < ph; ++a) rows[a] = xp + (i * ph + a) * w;
#if defined(__SSE2__)
        if (vector) j0 = pool_row_w2_sse2(rows, ph, ow, yr);
#else
        (void)vector;
#endif
        pool_row_scalar(rows, ph, ow, pw, yr, j0);
        continue;
      }
      // Tall windows (rare): column by column.
      for (int64_t j = 0; j < ow; ++j) {
        float m = xp[i * ph * w + j * pw];
        for (int64_t a = 0; a < ph; ++a)
          for (int64_t b = 0; b < pw; ++b) {
            const float v = xp[(i * ph + a) * w + j * pw + b];
            m = v > m ? v : m;
          }
        yr[j] = m;
      }
    }
  }
}

}  // namespace ortquant::integer
