// AVX-VNNI micro-kernels: VEX-encoded vpdpbusd on ymm (8 int32 lanes x 4 k-bytes), for CPUs with AVX-VNNI
// but without AVX-512 (and on this CPU when the path is chosen explicitly). Tile: kMR rows x 16 lanes =
// 12 accumulators. CMake has no flag rule for this file name: the target pragma enables the instructions here.
#pragma GCC target("avx2,fma,avxvnni")
#include "core/simd.h"

#include <cstring>

#include "core/gemm/kernels.h"

namespace ortquant::gemm::avxvnni {
namespace {

#include "core/gemm/epilogue_avx2.inc"

template <bool kCols>
inline __m256i dp(__m256i acc, __m256i a, __m256i b) {
  return kCols ? _mm256_dpbusd_avx_epi32(acc, b, a) : _mm256_dpbusd_avx_epi32(acc, a, b);
}

// Named accumulators (GCC keeps an array of vectors in memory); unused ones are optimized away.
#define OQ_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OQ_DECL(r) __m256i c##r##0 = z, c##r##1 = z;
#define OQ_ROW(r)                                                               \
  if constexpr (MR > r) {                                                       \
    const __m256i av = _mm256_set1_epi32(load_i32(a + 4 * r));                  \
    c##r##0 = dp<kCols>(c##r##0, av, b0);                                       \
    if constexpr (NV > 1) c##r##1 = dp<kCols>(c##r##1, av, b1);                 \
  }
#define OQ_OUT(r) \
  if constexpr (MR > r) s0[r] = c##r##0, s1[r] = c##r##1;

// Lanes c0 .. c0 + 8*NV of the tile.
template <bool kCols, int MR, int NV>
void chunk(const TileArgs& t, int c0) {
  const __m256i z = _mm256_setzero_si256();
  OQ_ROWS(OQ_DECL)
  const auto* a = static_cast<const uint8_t*>(t.a);
  const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
  for (int64_t g = 0; g < t.kgroups; ++g) {
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = NV > 1 ? _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32)) : z;
    OQ_ROWS(OQ_ROW)
    a += kMR * 4;
    b += kPanel * 4;
  }
  __m256i s0[MR], s1[MR];
  OQ_ROWS(OQ_OUT)
  epilogue8_any<kCols>(t, s0, MR, c0, t.nr - c0 < 8 ? t.nr - c0 : 8);
  if (NV > 1 && t.nr > c0 + 8) epilogue8_any<kCols>(t, s1, MR, c0 + 8, t.nr - c0 - 8 < 8 ? t.nr - c0 - 8 : 8);
}

#undef OQ_ROWS
#undef OQ_DECL
#undef OQ_ROW
#undef OQ_OUT

template <bool kCols, int MR>
void tile(const TileArgs& t) {
  for (int c0 = 0; c0 < t.nr; c0 += 16) {
    if (t.nr - c0 > 8) chunk<kCols, MR, 2>(t, c0);
    else chunk<kCols, MR, 1>(t, c0);
  }
}

template <bool kCols>
void tile_any(const TileArgs& t) {
  static_assert(kMR == 6, "tile shapes below assume kMR == 6");
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

}  // namespace ortquant::gemm::avxvnni
