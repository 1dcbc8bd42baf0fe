// AVX-512 VNNI micro-kernels: vpdpbusd on zmm (16 int32 lanes x 4 k-bytes). A full tile is kMR = 6 rows x 4
// vectors (64 lanes) = 24 independent accumulators, enough to hide vpdpbusd's 4-cycle latency at 2 per cycle.
// Narrow tiles (few rows, e.g. a GEMV) split the reduction over two accumulator sets instead.
// The epilogue converts each accumulator to float64 (exact) and requantizes in registers.
// GCC 12's AVX-512 intrinsic headers initialise "undefined" vectors from themselves, which -Wmaybe-uninitialized
// reports at every inlined use (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/simd.h"

#include <algorithm>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"
#include "core/gemm/cols_runs.h"
#include "core/gemm/kernels.h"

namespace ortquant::gemm::avx512vnni {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#include "core/gemm/epilogue_avx512.inc"

// The integer kinds when TileArgs::shift >= 0: the requantization in int32 (store16_shift).
template <bool kCols, int MR, int NV, OutKind K>
void epilogue_shift(const TileArgs& t, __m512i (&acc)[MR][NV]) {
  const size_t es = out_elem_size(K);
  const uint32_t half = t.shift > 0 ? uint32_t{1} << (t.shift - 1) : 0;
  const __m512i sh = _mm512_set1_epi32(t.shift);
  const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(t.ep->lo));
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(t.ep->hi));
  if constexpr (kCols) {
    for (int r = 0; r < MR; ++r) {
      const uint32_t k = static_cast<uint32_t>(t.bias ? t.bias[r] : 0) + half - static_cast<uint32_t>(t.corr[r]);
      const __m512i bh = _mm512_set1_epi32(static_cast<int32_t>(k));
      char* row = static_cast<char*>(t.out) + r * t.ldc * static_cast<int64_t>(es);
      for (int v = 0; v < NV; ++v) {
        const int n = t.nr - 16 * v;
        if (n <= 0) break;
        store16_shift<K>(acc[r][v], bh, sh, lo, hi, row + 16 * v * es, lane_mask(n));
      }
    }
  } else {
    for (int v = 0; v < NV; ++v) {
      const int n = t.nr - 16 * v;
      if (n <= 0) break;
      const __mmask16 m = lane_mask(n);
      __m512i bh = _mm512_sub_epi32(_mm512_set1_epi32(static_cast<int32_t>(half)),
                                    _mm512_loadu_si512(t.corr + 16 * v));  // padded to whole panels
      if (t.bias) bh = _mm512_add_epi32(bh, _mm512_maskz_loadu_epi32(m, t.bias + 16 * v));
      for (int r = 0; r < MR; ++r) {
        char* dst = static_cast<char*>(t.out) + (r * t.ldc + 16 * v) * static_cast<int64_t>(es);
        store16_shift<K>(acc[r][v], bh, sh, lo, hi, dst, m);
      }
    }
  }
}

template <bool kCols, int MR, int NV, OutKind K>
void epilogue(const TileArgs& t, __m512i (&acc)[MR][NV]) {
  if constexpr (K == OutKind::kInt8 || K == OutKind::kInt16 || K == OutKind::kInt32) {
    if (t.shift >= 0) return epilogue_shift<kCols, MR, NV, K>(t, acc);
  }
  const Consts c(*t.ep);
  const bool divide = t.ep->fdiv != 0.0;
  const size_t es = out_elem_size(K);
  const __m512d zero = _mm512_setzero_pd();
  if constexpr (kCols) {
    for (int r = 0; r < MR; ++r) {
      const __m512i corr = _mm512_set1_epi32(t.corr[r]);
      const __m512d b = t.bias ? _mm512_set1_pd(static_cast<double>(t.bias[r])) : zero;
      char* row = static_cast<char*>(t.out) + r * t.ldc * static_cast<int64_t>(es);
      for (int v = 0; v < NV; ++v) {
        const int n = t.nr - 16 * v;
        if (n <= 0) break;
        store16<K>(c, divide, _mm512_sub_epi32(acc[r][v], corr), b, b, row + 16 * v * es, lane_mask(n));
      }
    }
  } else {
    for (int v = 0; v < NV; ++v) {
      const int n = t.nr - 16 * v;
      if (n <= 0) break;
      const __mmask16 m = lane_mask(n);
      const __m512i corr = _mm512_loadu_si512(t.corr + 16 * v);  // padded to whole panels
      __m512d b0 = zero, b1 = zero;
      if (t.bias) {
        const __m512i bi = _mm512_maskz_loadu_epi32(m, t.bias + 16 * v);
        b0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(bi));
        b1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(bi, 1));
      }
      for (int r = 0; r < MR; ++r) {
        char* dst = static_cast<char*>(t.out) + (r * t.ldc + 16 * v) * static_cast<int64_t>(es);
        store16<K>(c, divide, _mm512_sub_epi32(acc[r][v], corr), b0, b1, dst, m);
      }
    }
  }
}

// vpdpbusd: first source unsigned bytes (the flipped activations), second signed (the weights).
template <bool kCols>
inline __m512i dp(__m512i acc, __m512i a, __m512i b) {
  return kCols ? _mm512_dpbusd_epi32(acc, b, a) : _mm512_dpbusd_epi32(acc, a, b);
}

// The accumulators are named variables (cRV, dRV), not an array: GCC keeps an array of vectors in memory and
// spills on every k-group. Unused ones (r >= MR or v >= NV) are optimized away.
#define OQ_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OQ_DECL(r)                                                  \
  __m512i c##r##0 = z, c##r##1 = z, c##r##2 = z, c##r##3 = z;       \
  __m512i d##r##0 = z, d##r##1 = z, d##r##2 = z, d##r##3 = z;
#define OQ_DP(acc, r, v, av, bv) \
  if constexpr (MR > r && NV > v) acc##r##v = dp<kCols>(acc##r##v, av, bv##v);
#define OQ_ROW(r)                                                    \
  if constexpr (MR > r) {                                            \
    const __m512i av = _mm512_set1_epi32(load_i32(a + 4 * r));       \
    OQ_DP(c, r, 0, av, b) OQ_DP(c, r, 1, av, b) OQ_DP(c, r, 2, av, b) OQ_DP(c, r, 3, av, b) \
  }
#define OQ_ROW2(r)                                                            \
  if constexpr (MR > r) {                                                     \
    const __m512i av = _mm512_set1_epi32(load_i32(a + 4 * r));                \
    const __m512i aw = _mm512_set1_epi32(load_i32(a + kMR * 4 + 4 * r));      \
    OQ_DP(c, r, 0, av, b) OQ_DP(c, r, 1, av, b) OQ_DP(c, r, 2, av, b) OQ_DP(c, r, 3, av, b) \
    OQ_DP(d, r, 0, aw, e) OQ_DP(d, r, 1, aw, e) OQ_DP(d, r, 2, aw, e) OQ_DP(d, r, 3, aw, e) \
  }
#define OQ_OUT1(r, v) \
  if constexpr (MR > r && NV > v) res[r][v] = _mm512_add_epi32(c##r##v, d##r##v);
#define OQ_OUT(r) OQ_OUT1(r, 0) OQ_OUT1(r, 1) OQ_OUT1(r, 2) OQ_OUT1(r, 3)

// The pixel or weight operand of a tile read from a packed panel: vector v (16 lanes x 4 bytes) of k-group g + ahead.
struct PanelSource {
  const uint8_t* bp;
  __m512i load(int v, int ahead) const { return _mm512_load_si512(bp + ahead * kPanel * 4 + 64 * v); }
  void next(int groups) { bp += groups * kPanel * 4; }
};

// The pixel operand of a cols tile read in place from channel-quad runs (gemm_cols_runs): lane l of vector v is the
// 4 bytes at runs[g] + off0[v] + 4 * l for the lanes of m0[v], and at runs[g] + off1[v] + 4 * l for those of m1[v]
// (the pixels of the next output row when the vector crosses a row end); lanes in neither mask are 0 and never
// stored.
// kCross: some vector crosses a row end (else the second load is left out).
struct RunsPos {
  int64_t off0[4], off1[4];
  __mmask16 m0[4], m1[4];
};
template <bool kCross>
struct RunsSource {
  const uint8_t* const* runs;
  RunsPos pos;
  __m512i load(int v, int ahead) const {
    const uint8_t* q = runs[ahead];
    const __m512i x = _mm512_maskz_loadu_epi32(pos.m0[v], q + pos.off0[v]);
    return kCross ? _mm512_mask_loadu_epi32(x, pos.m1[v], q + pos.off1[v]) : x;
  }
  void next(int groups) { runs += groups; }
};

template <bool kCols, int MR, int NV, class Src>
void tile(const TileArgs& t, Src src) {
  const __m512i z = _mm512_setzero_si512();
  OQ_ROWS(OQ_DECL)
  const auto* a = static_cast<const uint8_t*>(t.a);
  int64_t g = 0;
  if constexpr (MR * NV < 8) {
    // Too few accumulators to cover vpdpbusd's latency: a second set (dRV) takes every other k-group.
    for (; g + 2 <= t.kgroups; g += 2) {
      __m512i b0 = z, b1 = z, b2 = z, b3 = z, e0 = z, e1 = z, e2 = z, e3 = z;
      if constexpr (NV > 0) b0 = src.load(0, 0), e0 = src.load(0, 1);
      if constexpr (NV > 1) b1 = src.load(1, 0), e1 = src.load(1, 1);
      if constexpr (NV > 2) b2 = src.load(2, 0), e2 = src.load(2, 1);
      if constexpr (NV > 3) b3 = src.load(3, 0), e3 = src.load(3, 1);
      OQ_ROWS(OQ_ROW2)
      a += 2 * kMR * 4;
      src.next(2);
    }
  }
  for (; g < t.kgroups; ++g) {
    __m512i b0 = z, b1 = z, b2 = z, b3 = z;
    if constexpr (NV > 0) b0 = src.load(0, 0);
    if constexpr (NV > 1) b1 = src.load(1, 0);
    if constexpr (NV > 2) b2 = src.load(2, 0);
    if constexpr (NV > 3) b3 = src.load(3, 0);
    OQ_ROWS(OQ_ROW)
    a += kMR * 4;
    src.next(1);
  }
  __m512i res[MR][NV];
  OQ_ROWS(OQ_OUT)
  switch (t.ep->kind) {
    case OutKind::kInt8: epilogue<kCols, MR, NV, OutKind::kInt8>(t, res); break;
    case OutKind::kInt16: epilogue<kCols, MR, NV, OutKind::kInt16>(t, res); break;
    case OutKind::kInt32: epilogue<kCols, MR, NV, OutKind::kInt32>(t, res); break;
    case OutKind::kFloat: epilogue<kCols, MR, NV, OutKind::kFloat>(t, res); break;
    case OutKind::kRaw: epilogue<kCols, MR, NV, OutKind::kRaw>(t, res); break;
  }
}

#undef OQ_ROWS
#undef OQ_DECL
#undef OQ_DP
#undef OQ_ROW
#undef OQ_ROW2
#undef OQ_OUT1
#undef OQ_OUT

template <bool kCols, int MR, class Src>
void tile_nv(const TileArgs& t, const Src& src) {
  switch ((t.nr + 15) / 16) {
    case 1: tile<kCols, MR, 1>(t, src); break;
    case 2: tile<kCols, MR, 2>(t, src); break;
    case 3: tile<kCols, MR, 3>(t, src); break;
    default: tile<kCols, MR, 4>(t, src); break;
  }
}

template <bool kCols, class Src>
void tile_any(const TileArgs& t, const Src& src) {
  static_assert(kMR == 6 && kPanel == 64, "tile shapes below assume a 6 x 64 tile");
  switch (t.mr) {
    case 1: tile_nv<kCols, 1>(t, src); break;
    case 2: tile_nv<kCols, 2>(t, src); break;
    case 3: tile_nv<kCols, 3>(t, src); break;
    case 4: tile_nv<kCols, 4>(t, src); break;
    case 5: tile_nv<kCols, 5>(t, src); break;
    default: tile_nv<kCols, 6>(t, src); break;
  }
}

}  // namespace

void tile_rows(const TileArgs& t) { tile_any<false>(t, PanelSource{static_cast<const uint8_t*>(t.b)}); }
void tile_cols(const TileArgs& t) { tile_any<true>(t, PanelSource{static_cast<const uint8_t*>(t.b)}); }

void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par) {
  if (w.layout != PackedWeights::Layout::kRowBlocks) throw_error("gemm_cols_runs needs weights packed as row blocks");
  if (ow < 16) throw_error("gemm_cols_runs: AVX-512 runs need output rows of at least 16 pixels");
  const int64_t p = checked_mul(oh, ow, "gemm_cols_runs pixels");
  if (w.n == 0 || p == 0) return;
  const int64_t mb = w.blocks();
  const int shift = exact_shift(ep, ep.bias, w.n, w.k);
  const int64_t panels = (p + kPanel - 1) / kPanel;
  const int64_t tasks = runs_tasks(w, p, panels);
  par(static_cast<size_t>(tasks), [&](size_t task) {
    const int64_t q0 = panels * static_cast<int64_t>(task) / tasks, q1 = panels * static_cast<int64_t>(task + 1) / tasks;
    TileArgs args = call_args(w, ep, ldc);
    args.shift = shift;
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t c0 = q * kPanel, n = std::min<int64_t>(kPanel, p - c0);
      // Vector v covers pixels c0 + 16 v ... : the part left in its output row from off0, the rest (fewer than 16
      // <= ow pixels) from the start of the next row.
      RunsPos pos;
      for (int v = 0; v < 4; ++v) {
        const int64_t first = c0 + 16 * v, lanes = std::clamp<int64_t>(n - 16 * v, 0, 16);
        const int64_t y = first / ow, x = first % ow, here = std::min<int64_t>(lanes, ow - x);
        pos.off0[v] = 4 * (y * cols + x);
        pos.m0[v] = lane_mask(static_cast<int>(here));
        pos.off1[v] = 4 * ((y + 1) * cols - here);
        pos.m1[v] = static_cast<__mmask16>(lane_mask(static_cast<int>(lanes)) & ~pos.m0[v]);
      }
      args.nr = static_cast<int>(n);
      const bool cross = (pos.m1[0] | pos.m1[1] | pos.m1[2] | pos.m1[3]) != 0;
      for (int64_t blk = 0; blk < mb; ++blk) {
        set_weight_block(args, w, blk, out, c0);
        if (cross) tile_any<true>(args, RunsSource<true>{runs, pos});
        else tile_any<true>(args, RunsSource<false>{runs, pos});
      }
    }
  });
}

}  // namespace ortquant::gemm::avx512vnni
