#include "core/gemm/pack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/cpu.h"
#include "core/error.h"

namespace ortquant::gemm {
namespace {

// PackedWeights::run_abs of row-block weights: per row and half, prefix sums of |w| over k-groups, then for every run
// length f the largest aligned run's sum (O(kgroups * log) per row and half).
std::vector<int32_t> run_abs_table(const PackedWeights& w, int64_t n) {
  constexpr int64_t kRuns = 128;
  const int64_t kg = w.kgroups, fmax = std::min<int64_t>(kRuns, kg);
  std::vector<int32_t> table(static_cast<size_t>(fmax), 0);
  std::vector<int32_t> prefix(static_cast<size_t>(kg + 1));
  for (int64_t j = 0; j < n; ++j) {
    const int8_t* row = w.data.data() + ((j / kMR) * kg * kMR + j % kMR) * 4;  // k-group g at row + g * kMR * 4
    for (int h = 0; h < 2; ++h) {
      prefix[0] = 0;
      for (int64_t g = 0; g < kg; ++g) {
        const int8_t* b = row + g * kMR * 4 + 2 * h;
        prefix[static_cast<size_t>(g + 1)] = prefix[static_cast<size_t>(g)] + std::abs(static_cast<int32_t>(b[0])) +
                                             std::abs(static_cast<int32_t>(b[1]));
      }
      for (int64_t f = 1; f <= fmax; ++f) {
        int32_t& best = table[static_cast<size_t>(f - 1)];
        for (int64_t g0 = 0; g0 < kg; g0 += f) {
          const int64_t g1 = std::min(kg, g0 + f);
          best = std::max(best, prefix[static_cast<size_t>(g1)] - prefix[static_cast<size_t>(g0)]);
        }
      }
    }
  }
  return table;
}

// W[j][kk] = at(j, kk) for j < n, kk < k, into blocks of `block` rows.
template <class At>
PackedWeights pack_generic(int64_t n, int64_t k, PackedWeights::Layout layout, At at) {
  if (n < 0 || k < 0) throw_error("gemm: negative matrix size");
  if (k > kMaxK) throw_error("reduction length ", k, " exceeds ", kMaxK, " (the int32 accumulator would overflow)");
  PackedWeights w;
  w.layout = layout;
  w.n = n;
  w.k = k;
  w.kgroups = kgroups_of(k);
  const int block = w.block();
  const int64_t blocks = w.blocks();
  w.data.resize(static_cast<size_t>(blocks * w.kgroups * block * 4));
  if (w.data.size()) std::memset(w.data.data(), 0, w.data.size());
  w.corr.assign(static_cast<size_t>(blocks * block), 0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t bi = j / block, lane = j % block;
    int8_t* base = w.data.data() + (bi * w.kgroups * block + lane) * 4;
    uint32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int8_t v = at(j, kk);
      base[(kk / 4) * block * 4 + (kk % 4)] = v;
      sum += static_cast<uint32_t>(static_cast<int32_t>(v));
    }
    w.corr[static_cast<size_t>(j)] = static_cast<int32_t>(sum * 128u);
  }
  // Is any weight -128? Branch-free (an OR over the whole buffer vectorizes): BmmInt packs its runtime y on every
  // call, and a compare-and-branch per byte cost it 12-75 % (bench_ab.py).
  uint8_t any_min = 0;
  const int8_t* wd = w.data.data();
  for (size_t i = 0; i < w.data.size(); ++i) any_min |= static_cast<uint8_t>(wd[i] == -128);
  w.no_min = any_min == 0;
  // The largest |w| (bounds the AVX2 int16 sums of Epilogue::x_max); a u8 max, branch-free like the scan above.
  uint8_t max_abs = 0;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const auto v = static_cast<uint8_t>(wd[i] < 0 ? -static_cast<int32_t>(wd[i]) : wd[i]);
    max_abs = v > max_abs ? v : max_abs;
  }
  w.max_abs = max_abs;
  if (layout == PackedWeights::Layout::kRowBlocks && n > 0 && w.kgroups > 1) w.run_abs = run_abs_table(w, n);
  return w;
}

}  // namespace

int32_t nonneg_flush_of(const PackedWeights& w, int32_t x_max) {
  const int32_t pair = 2 * x_max * std::min<int32_t>(std::max<int32_t>(w.max_abs, 0), 128);
  if (pair == 0) return kMaxFlushGroups;
  int32_t f = std::max<int32_t>(1, std::min<int32_t>(kMaxFlushGroups, 32767 / pair));
  for (size_t i = w.run_abs.size(); i > static_cast<size_t>(f); --i)
    if (static_cast<int64_t>(x_max) * w.run_abs[i - 1] <= 32767) return static_cast<int32_t>(i);
  return f;
}

PackedWeights pack_weights(const int8_t* w, int64_t n, int64_t k, int64_t ldw, PackedWeights::Layout layout) {
  return pack_generic(n, k, layout, [&](int64_t j, int64_t kk) { return w[j * ldw + kk]; });
}

PackedWeights pack_weights_strided(const int8_t* base, int64_t n, int64_t k, int64_t sn, int64_t sk,
                                   PackedWeights::Layout layout) {
  return pack_generic(n, k, layout, [&](int64_t j, int64_t kk) { return base[j * sn + kk * sk]; });
}

PackedWeights pack_weights_kmajor(const int8_t* b, int64_t k, int64_t n, int64_t ldb) {
  return pack_generic(n, k, PackedWeights::Layout::kPanels, [&](int64_t j, int64_t kk) { return b[kk * ldb + j]; });
}

void prepare_cols(PackedCols* c, int64_t p, int64_t k) {
  if (p < 0 || k < 0) throw_error("gemm: negative matrix size");
  if (k > kMaxK) throw_error("reduction length ", k, " exceeds ", kMaxK, " (the int32 accumulator would overflow)");
  c->p = p;
  c->k = k;
  c->kgroups = kgroups_of(k);
  const size_t bytes = static_cast<size_t>(c->panels() * c->kgroups * kPanel * 4);
  if (c->data.size() < bytes) c->data.resize(bytes);
}

namespace {

// Interleaves 4 rows (nullptr = zeros) at pixels [p0, p0 + n) into one k-group of a panel (kPanel lanes x 4).
inline void interleave4(const int8_t* const rows[4], int64_t p0, int64_t n, uint8_t* dst) {
  static const int8_t kZeros[16] = {};
  int64_t q = 0;
#if defined(__SSE2__)
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (; q + 16 <= n; q += 16) {
    __m128i v[4];
    for (int i = 0; i < 4; ++i) {
      const int8_t* src = rows[i] ? rows[i] + p0 + q : kZeros;
      v[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)), flip);
    }
    const __m128i ab_lo = _mm_unpacklo_epi8(v[0], v[1]), ab_hi = _mm_unpackhi_epi8(v[0], v[1]);
    const __m128i cd_lo = _mm_unpacklo_epi8(v[2], v[3]), cd_hi = _mm_unpackhi_epi8(v[2], v[3]);
    __m128i* out = reinterpret_cast<__m128i*>(dst + q * 4);
    _mm_store_si128(out + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
    _mm_store_si128(out + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
    _mm_store_si128(out + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
    _mm_store_si128(out + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
  }
#endif
  for (; q < n; ++q) {
    for (int i = 0; i < 4; ++i) {
      const int8_t v = rows[i] ? rows[i][p0 + q] : 0;
      dst[q * 4 + i] = static_cast<uint8_t>(v) ^ 0x80u;
    }
  }
  if (n < kPanel) std::memset(dst + n * 4, 0x80, static_cast<size_t>((kPanel - n) * 4));
}

}  // namespace

void pack_cols_group(PackedCols* c, int64_t kg, const int8_t* const rows[4]) {
  const int64_t panels = c->panels();
  for (int64_t pi = 0; pi < panels; ++pi) {
    const int64_t p0 = pi * kPanel;
    interleave4(rows, p0, std::min<int64_t>(kPanel, c->p - p0), c->data.data() + (pi * c->kgroups + kg) * kPanel * 4);
  }
}

namespace avx512 {
void pack_panel(const int8_t* const* rows, int64_t k, int64_t p0, int64_t n, uint8_t* dst);
}

void pack_panel(const int8_t* const* rows, int64_t k, int64_t p0, int64_t n, uint8_t* dst) {
  // Exact data movement: the AVX-512 version whenever the CPU (and the forced path) allows it.
  if (active_isa() >= Isa::kAvx512) {
    avx512::pack_panel(rows, k, p0, n, dst);
    return;
  }
  const int64_t kg = kgroups_of(k);
  for (int64_t g = 0; g < kg; ++g) {
    const int8_t* r[4];
    for (int i = 0; i < 4; ++i) r[i] = 4 * g + i < k ? rows[4 * g + i] : nullptr;
    interleave4(r, p0, n, dst + g * kPanel * 4);
  }
}

void pack_cols(PackedCols* c, const int8_t* x, int64_t ldx, int64_t kg0, int64_t kg1) {
  for (int64_t g = kg0; g < kg1; ++g) {
    const int8_t* rows[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t kk = 4 * g + i;
      rows[i] = kk < c->k ? x + kk * ldx : nullptr;
    }
    pack_cols_group(c, g, rows);
  }
}

void pack_rows_tile(const int8_t* a, int64_t m, int64_t lda, int64_t k, int64_t m0, uint8_t* tile) {
  const int64_t kg = kgroups_of(k);
  const int64_t full = k / 4;
  for (int r = 0; r < kMR; ++r) {
    uint8_t* dst = tile + r * 4;
    if (m0 + r >= m) {
      for (int64_t g = 0; g < kg; ++g) std::memset(dst + g * kMR * 4, 0x80, 4);
      continue;
    }
    const int8_t* src = a + (m0 + r) * lda;
    for (int64_t g = 0; g < full; ++g) {
      uint32_t v;
      std::memcpy(&v, src + 4 * g, 4);
      v ^= 0x80808080u;
      std::memcpy(dst + g * kMR * 4, &v, 4);
    }
    if (full < kg) {
      uint8_t* d = dst + full * kMR * 4;
      for (int j = 0; j < 4; ++j) {
        const int64_t kk = 4 * full + j;
        d[j] = kk < k ? static_cast<uint8_t>(src[kk]) ^ 0x80u : 0x80u;
      }
    }
  }
}

}  // namespace ortquant::gemm
