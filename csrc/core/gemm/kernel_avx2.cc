// AVX2 micro-kernels without VNNI. vpmaddubsw would saturate its int16 pair sums (255 * -128 * 2 < -32768), so
// both operands are widened to int16 instead (u8 zero-extended, s8 sign-extended) and multiplied with vpmaddwd,
// whose int32 pair sums are exact. A lane then holds the sum of k-bytes 0-1 or 2-3 of one column; the two halves
// are added once at the end (vphaddd). Tile: kMR rows x 8 columns, 12 accumulators.
#include <immintrin.h>

#include <cstring>

#include "core/gemm/kernels.h"

namespace ortquant::gemm::avx2 {
namespace {

#include "core/gemm/epilogue_avx2.inc"

// Named accumulators (GCC keeps an array of vectors in memory); unused ones are optimized away.
#define OQ_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OQ_DECL(r) __m256i l##r = z, h##r = z;
#define OQ_ROW(r)                                                                                     \
  if constexpr (MR > r) {                                                                             \
    __m256i av;                                                                                       \
    if constexpr (kW16) {                                                                             \
      av = _mm256_set1_epi64x(load_i64(a16 + 4 * r));                                                 \
    } else {                                                                                          \
      const __m128i a4 = _mm_cvtsi32_si128(load_i32(a + 4 * r));                                      \
      av = _mm256_broadcastq_epi64(kCols ? _mm_cvtepi8_epi16(a4) : _mm_cvtepu8_epi16(a4));            \
    }                                                                                                 \
    l##r = _mm256_add_epi32(l##r, _mm256_madd_epi16(b0, av));                                        \
    h##r = _mm256_add_epi32(h##r, _mm256_madd_epi16(b1, av));                                        \
  }
// [c0 c1 c4 c5 | c2 c3 c6 c7] -> [c0 .. c7]
#define OQ_OUT(r) \
  if constexpr (MR > r) s[r] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(l##r, h##r), 0xD8);

inline int64_t load_i64(const void* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// kW16 (cols only): the weights come pre-widened (t.a16), one vpbroadcastq per row and k-group.
template <bool kCols, int MR, bool kW16 = false>
void tile(const TileArgs& t) {
  const __m256i z = _mm256_setzero_si256();
  for (int c0 = 0; c0 < t.nr; c0 += 8) {
    OQ_ROWS(OQ_DECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    [[maybe_unused]] const int16_t* a16 = t.a16;
    const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
    for (int64_t g = 0; g < t.kgroups; ++g) {
      // 8 lanes x 4 k-bytes: lanes 0-3 and 4-7 widened to 16 int16 each.
      const __m128i braw0 = _mm_load_si128(reinterpret_cast<const __m128i*>(b));
      const __m128i braw1 = _mm_load_si128(reinterpret_cast<const __m128i*>(b + 16));
      const __m256i b0 = kCols ? _mm256_cvtepu8_epi16(braw0) : _mm256_cvtepi8_epi16(braw0);
      const __m256i b1 = kCols ? _mm256_cvtepu8_epi16(braw1) : _mm256_cvtepi8_epi16(braw1);
      OQ_ROWS(OQ_ROW)
      a += kMR * 4;
      if constexpr (kW16) a16 += kMR * 4;
      b += kPanel * 4;
    }
    __m256i s[MR];
    OQ_ROWS(OQ_OUT)
    const int n = t.nr - c0 < 8 ? t.nr - c0 : 8;
    epilogue8_any<kCols>(t, s, MR, c0, n);
  }
}

#undef OQ_ROWS
#undef OQ_DECL
#undef OQ_ROW
#undef OQ_OUT

template <bool kCols>
void tile_any(const TileArgs& t) {
  static_assert(kMR == 6, "tile shapes below assume kMR == 6");
  if constexpr (kCols) {
    if (t.a16 != nullptr) {
      switch (t.mr) {
        case 1: tile<kCols, 1, true>(t); return;
        case 2: tile<kCols, 2, true>(t); return;
        case 3: tile<kCols, 3, true>(t); return;
        case 4: tile<kCols, 4, true>(t); return;
        case 5: tile<kCols, 5, true>(t); return;
        default: tile<kCols, 6, true>(t); return;
      }
    }
  }
  switch (t.mr) {
    case 1: tile<kCols, 1>(t); break;
    case 2: tile<kCols, 2>(t); break;
    case 3: tile<kCols, 3>(t); break;
    case 4: tile<kCols, 4>(t); break;
    case 5: tile<kCols, 5>(t); break;
    default: tile<kCols, 6>(t); break;
  }
}

}  // namespace

void tile_rows(const TileArgs& t) { tile_any<false>(t); }
void tile_cols(const TileArgs& t) { tile_any<true>(t); }

}  // namespace ortquant::gemm::avx2
