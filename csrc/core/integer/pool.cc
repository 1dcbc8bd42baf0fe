#include "core/integer/pool.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu.h"
#include "core/integer/pool_kernels.h"

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
  // The short rows of small images: 2 outputs from 4 floats of each window row, then 1 from 2 (no scalar chain).
  if (j + 2 <= ow) {
    __m128 v = _mm_loadu_ps(r[0] + 2 * j);
    for (int64_t a = 1; a < ph; ++a) v = _mm_max_ps(v, _mm_loadu_ps(r[a] + 2 * j));
    const __m128 even = _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 odd = _mm_shuffle_ps(v, v, _MM_SHUFFLE(3, 1, 3, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + j), _mm_castps_si128(_mm_max_ps(even, odd)));  // (unaligned)
    j += 2;
  }
  if (j < ow) {  // two floats of each window row (movq: no alignment asked)
    const auto two = [&](int64_t a) {
      return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[a] + 2 * j)));
    };
    __m128 v = two(0);
    for (int64_t a = 1; a < ph; ++a) v = _mm_max_ps(v, two(a));
    _mm_store_ss(y + j, _mm_max_ss(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(1, 1, 1, 1))));
    ++j;
  }
  return j;
}
#endif

// Codes: the scalar loop, and pw == 2 with SSE2: 16 outputs per step from 32 bytes of each window row (signed
// bytes biased by 0x80 so that the unsigned max pmaxub orders them; the max of each byte pair over 16-bit lanes).
void pool_row_scalar(const int8_t* const* r, int64_t ph, int64_t ow, int64_t pw, int8_t* y, int64_t j0) {
  for (int64_t j = j0; j < ow; ++j) {
    int8_t m = r[0][j * pw];
    for (int64_t a = 0; a < ph; ++a)
      for (int64_t b = 0; b < pw; ++b) m = r[a][j * pw + b] > m ? r[a][j * pw + b] : m;
    y[j] = m;
  }
}

#if defined(__SSE2__)
int64_t pool_row_w2_sse2(const int8_t* const* r, int64_t ph, int64_t ow, int8_t* y) {
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80)), low = _mm_set1_epi16(0x00ff);
  int64_t j = 0;
  for (; j + 16 <= ow; j += 16) {
    __m128i lo = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + 2 * j)), bias);
    __m128i hi = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + 2 * j + 16)), bias);
    for (int64_t a = 1; a < ph; ++a) {
      lo = _mm_max_epu8(lo, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[a] + 2 * j)), bias));
      hi = _mm_max_epu8(hi, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[a] + 2 * j + 16)), bias));
    }
    const __m128i mlo = _mm_max_epu8(_mm_and_si128(lo, low), _mm_srli_epi16(lo, 8));  // pair maxima, 16-bit lanes
    const __m128i mhi = _mm_max_epu8(_mm_and_si128(hi, low), _mm_srli_epi16(hi, 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + j), _mm_xor_si128(_mm_packus_epi16(mlo, mhi), bias));
  }
  // Narrow rows (a small image's): 8 outputs from 16 bytes of each window row, then 4 from 8.
  if (j + 8 <= ow) {
    __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + 2 * j)), bias);
    for (int64_t a = 1; a < ph; ++a)
      v = _mm_max_epu8(v, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[a] + 2 * j)), bias));
    const __m128i m = _mm_max_epu8(_mm_and_si128(v, low), _mm_srli_epi16(v, 8));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + j), _mm_xor_si128(_mm_packus_epi16(m, m), bias));
    j += 8;
  }
  if (j + 4 <= ow) {
    __m128i v = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[0] + 2 * j)), bias);
    for (int64_t a = 1; a < ph; ++a)
      v = _mm_max_epu8(v, _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r[a] + 2 * j)), bias));
    const __m128i m = _mm_max_epu8(_mm_and_si128(v, low), _mm_srli_epi16(v, 8));
    const int32_t four = _mm_cvtsi128_si32(_mm_xor_si128(_mm_packus_epi16(m, m), bias));
    std::memcpy(y + j, &four, sizeof(four));
    j += 4;
  }
  // The last 1-3 outputs: each the max of its window's independent byte pairs (no chain through one running max).
  for (; j < ow; ++j) {
    int m = std::max(r[0][2 * j], r[0][2 * j + 1]);
    for (int64_t a = 1; a < ph; ++a) m = std::max(m, static_cast<int>(std::max(r[a][2 * j], r[a][2 * j + 1])));
    y[j] = static_cast<int8_t>(m);
  }
  return j;
}
#endif

template <class T>
void pool_windows(const T* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, T* y) {
  const int64_t oh = h / ph, ow = w / pw;
  const bool vector = pw == 2 && ph <= 8 && active_isa() != Isa::kScalar;
  const T* rows[8];
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * h * w;
    for (int64_t i = 0; i < oh; ++i) {
      T* yr = y + (p * oh + i) * ow;
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
        T m = xp[i * ph * w + j * pw];
        for (int64_t a = 0; a < ph; ++a)
          for (int64_t b = 0; b < pw; ++b) {
            const T v = xp[(i * ph + a) * w + j * pw + b];
            m = v > m ? v : m;
          }
        yr[j] = m;
      }
    }
  }
}

}  // namespace

void max_pool_windows(const int8_t* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, int8_t* y) {
  pool_windows(x, planes, h, w, ph, pw, y);
}

void max_pool_windows(const float* x, int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, float* y) {
  pool_windows(x, planes, h, w, ph, pw, y);
}

void avg_pool_codes(const int8_t* x, int64_t planes, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                    int64_t sw, int32_t offset, float scale, float* y) {
  const int64_t oh = (h - kh) / sh + 1, ow = (w - kw) / sw + 1;
  const int64_t k = kh * kw;
  // A power-of-two window: dividing by it is multiplying by its exact inverse (the same double).
  const bool pow2 = (k & (k - 1)) == 0;
  const double inv = 1.0 / static_cast<double>(k), kd = static_cast<double>(k), s = scale;
  const int64_t bias = static_cast<int64_t>(offset) * k;
  const auto col_sums = select_isa(&scalar::code_col_sums_isa, &avx2::code_col_sums_isa, &avx512::code_col_sums_isa);
  thread_local std::vector<int32_t> cols;  // per input column: the sum over the window's rows
  if (cols.size() < static_cast<size_t>(w)) cols.resize(static_cast<size_t>(w));
  int32_t* const c = cols.data();
  for (int64_t p = 0; p < planes; ++p) {
    const int8_t* xp = x + p * h * w;
    float* yp = y + p * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      col_sums(xp + i * sh * w, kh, w, w, c);
      for (int64_t j = 0; j < ow; ++j) {
        int64_t sum = bias;
        for (int64_t b = 0; b < kw; ++b) sum += c[j * sw + b];
        const double v = static_cast<double>(sum) * s;  // exact
        yp[i * ow + j] = static_cast<float>(pow2 ? v * inv : v / kd);
      }
    }
  }
}

}  // namespace ortquant::integer
