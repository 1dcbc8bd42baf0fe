// Array forms of the float16 helpers of core/half.h: conversions between float16 (uint16_t bits) and float32 and
// in-place rounding of float32 values to float16 precision and range (what numpy does after every float16
// operation). Files compiled with AVX-512F or F16C (the _avx512 / _avx2 files) convert 16 or 8 values per
// instruction; everything else, and the tails, goes through half.h, which gives the same bits (round to nearest
// even, overflow to inf, subnormals exact, NaN quieted with its sign and top payload bits).
// `static` like half.h: every ISA file compiles its own copy with its own flags. (The AVX-512 forms are the
// zero-masking ones with a full mask: the plain ones trip GCC 12's -Wmaybe-uninitialized inside its headers.)
#pragma once
#include <cstdint>

#if defined(__AVX512F__) || defined(__F16C__)
#include "core/simd.h"
#endif

#include "core/half.h"

namespace ortquant {

static inline void half_to_float_n(const uint16_t* h, float* f, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
    _mm512_storeu_ps(f + i, _mm512_maskz_cvtph_ps(0xFFFF, v));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(v));
  }
#endif
  for (; i < n; ++i) f[i] = half_to_float(h[i]);
}

static inline void float_to_half_n(const float* f, uint16_t* h, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i v = _mm512_maskz_cvtps_ph(0xFFFF, _mm512_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), v);
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), v);
  }
#endif
  for (; i < n; ++i) h[i] = float_to_half(f[i]);
}

// f[i] = round_to_half(f[i]) for i in [0, n).
static inline void round_to_half_n(float* f, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i v = _mm512_maskz_cvtps_ph(0xFFFF, _mm512_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(f + i, _mm512_maskz_cvtph_ps(0xFFFF, v));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(v));
  }
#endif
  for (; i < n; ++i) f[i] = round_to_half(f[i]);
}

}  // namespace ortquant
