// The scalar reference kernels (compiled without auto-vectorization): the oracle every SIMD path is tested
// against. Same packed formats and the same wrapped int32 arithmetic as vpdpbusd.
#include <cstring>

#include "core/gemm/kernels.h"

namespace ortquant::gemm::scalar {
namespace {

// acc[r][c] += sum over the tile's k-groups of u8 x s8 products, wrapping modulo 2^32.
template <bool kCols>
void tile(const TileArgs& t) {
  uint32_t acc[kMR][kPanel];
  std::memset(acc, 0, sizeof(acc));
  const auto* a = static_cast<const uint8_t*>(t.a);
  const auto* b = static_cast<const uint8_t*>(t.b);
  for (int64_t g = 0; g < t.kgroups; ++g) {
    for (int r = 0; r < t.mr; ++r) {
      const uint8_t* ar = a + r * 4;
      for (int c = 0; c < t.nr; ++c) {
        const uint8_t* bc = b + c * 4;
        uint32_t s = 0;
        for (int j = 0; j < 4; ++j) {
          // The u8 side is the activation (rows: a, cols: b); the other byte is an s8 weight.
          const int32_t u = kCols ? bc[j] : ar[j];
          const int32_t w = kCols ? static_cast<int8_t>(ar[j]) : static_cast<int8_t>(bc[j]);
          s += static_cast<uint32_t>(u * w);
        }
        acc[r][c] += s;
      }
    }
    a += kMR * 4;
    b += kPanel * 4;
  }
  const Epilogue& ep = *t.ep;
  for (int r = 0; r < t.mr; ++r) {
    for (int c = 0; c < t.nr; ++c) {
      const int w = kCols ? r : c;
      const int32_t v = corrected(static_cast<int32_t>(acc[r][c]), t.corr[w]);
      store_scalar(ep, v, t.bias ? t.bias[w] : 0, t.out, r * t.ldc + c);
    }
  }
}

}  // namespace

void tile_rows(const TileArgs& t) { tile<false>(t); }
void tile_cols(const TileArgs& t) { tile<true>(t); }

}  // namespace ortquant::gemm::scalar
