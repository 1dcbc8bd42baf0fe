// gemm_cols_runs (cols_runs.h): tile_nonneg of kernel_avx2.cc with its pixel operand read from the channel-quad
// runs instead of a packed panel. Tile: 16 pixels (two 8-pixel chunks) x MR <= 6 weight rows while two chunks are
// left, else 8 pixels x MR. nonneg_flush > 1: int16 pair sums for nonneg_flush k-groups, then widened into int32
// accumulators (in memory for 16 pixels, touched once per widening); nonneg_flush == 1: each pair sum widened at
// once into 12 int32 accumulators in registers (one_step2). The accumulators start at the rows' corrections (the
// shared epilogue subtracts them).
#include "core/simd.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/gemm/cols_runs.h"
#include "core/gemm/kernels.h"

namespace ortquant::gemm {

namespace avx2 {
namespace {

#include "core/gemm/epilogue_avx2.inc"
#include "core/gemm/nonneg_step_avx2.inc"

#define OQ_RROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OQ_RDECL(r) __m256i acc##r = MR > r ? _mm256_set1_epi32(t.corr[r < MR ? r : 0]) : z, s##r = z;
#define OQ_RROW(r)                                                               \
  if constexpr (MR > r) {                                                        \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                   \
    s##r = _mm256_add_epi16(s##r, _mm256_maddubs_epi16(xv, wb));                 \
  }
#define OQ_RFLUSH(r)                                                    \
  if constexpr (MR > r) {                                               \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(s##r, ones));   \
    s##r = z;                                                           \
  }
#define OQ_R1ROW(r)                                                                                \
  if constexpr (MR > r) {                                                                          \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                                     \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wb), ones));      \
  }
#define OQ_ROUT(r) \
  if constexpr (MR > r) s[r] = acc##r;

#define OQ_R2DECL(r) __m256i l##r = z, h##r = z;
#define OQ_R2ROW(r) \
  if constexpr (MR > r) nonneg_step2(l##r, h##r, x0, x1, a + 4 * r);
#define OQ_R2FLUSH(r)              \
  if constexpr (MR > r) {          \
    widen_into(acc + r, l##r);     \
    widen_into(acc + 6 + r, h##r); \
  }

// Chunks ci and ci + 1 of tile_runs (nonneg_flush > 1): 16 pixels per k-group, 12 int16 accumulators.
template <int MR>
void tile_runs16(const TileArgs& t, const uint8_t* const* runs, int64_t off0, int64_t off1, int ci) {
  const __m256i z = _mm256_setzero_si256();
  const int64_t flush = t.nonneg_flush;
  // Chunk ci's pixels of row r in acc[r], chunk ci + 1's in acc[6 + r]; rows >= MR are never read (zeroing all 12
  // was a rep stos per tile).
  __m256i acc[12];
  for (int r = 0; r < MR; ++r) acc[r] = acc[6 + r] = _mm256_set1_epi32(t.corr[r]);
  OQ_RROWS(OQ_R2DECL)
  const auto* a = static_cast<const uint8_t*>(t.a);
  for (int64_t g0 = 0; g0 < t.kgroups; g0 += flush) {
    const int64_t g1 = t.kgroups - g0 < flush ? t.kgroups : g0 + flush;
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* q = runs[g];
      const __m256i x0 = load_flip80(q + off0), x1 = load_flip80(q + off1);
      OQ_RROWS(OQ_R2ROW)
      a += kMR * 4;
    }
    OQ_RROWS(OQ_R2FLUSH)
  }
  epilogue8_any<true>(t, acc, MR, 8 * ci, 8);
  epilogue8_any<true>(t, acc + 6, MR, 8 * ci + 8, 8);
}

// Pixels [p0, p0 + 8 * chunks) (p0 a multiple of 8) of one weight block: chunk i reads runs[g] + pos[i].
template <int MR, bool kOne>
void tile_runs(const TileArgs& t, const uint8_t* const* runs, const int64_t* pos, int chunks) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const int64_t flush = t.nonneg_flush;
  for (int ci = 0; ci < chunks; ++ci) {
    if (ci + 1 < chunks) {
      if constexpr (kOne) {
        const int64_t off0 = pos[ci], off1 = pos[ci + 1];
        __m256i acc[12];
        one16<MR, false>(
            t,
            [&](int64_t g, __m256i& x0, __m256i& x1) {
              const uint8_t* q = runs[g];
              x0 = load_flip80(q + off0);
              x1 = load_flip80(q + off1);
            },
            acc);
        epilogue8_any<true>(t, acc, MR, 8 * ci, 8);
        epilogue8_any<true>(t, acc + 6, MR, 8 * ci + 8, 8);
        ++ci;
        continue;
      } else if (flush > 1) {
        tile_runs16<MR>(t, runs, pos[ci], pos[ci + 1], ci);
        ++ci;
        continue;
      }
    }
    OQ_RROWS(OQ_RDECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    const int64_t off = pos[ci];
    if constexpr (kOne) {
      for (int64_t g = 0; g < t.kgroups; ++g) {
        const __m256i xv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs[g] + off)), flip);
        OQ_RROWS(OQ_R1ROW)
        a += kMR * 4;
      }
    } else {
      for (int64_t g0 = 0; g0 < t.kgroups; g0 += flush) {
        const int64_t g1 = t.kgroups - g0 < flush ? t.kgroups : g0 + flush;
        for (int64_t g = g0; g < g1; ++g) {
          const __m256i xv =
              _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs[g] + off)), flip);
          OQ_RROWS(OQ_RROW)
          a += kMR * 4;
        }
        OQ_RROWS(OQ_RFLUSH)
      }
    }
    __m256i s[MR];
    OQ_RROWS(OQ_ROUT)
    epilogue8_any<true>(t, s, MR, 8 * ci, 8);
  }
}

#undef OQ_RROWS
#undef OQ_RDECL
#undef OQ_RROW
#undef OQ_RFLUSH
#undef OQ_R1ROW
#undef OQ_ROUT
#undef OQ_R2DECL
#undef OQ_R2ROW
#undef OQ_R2FLUSH

template <bool kOne>
void tile_runs_any(const TileArgs& t, const uint8_t* const* runs, const int64_t* pos, int chunks) {
  switch (t.mr) {
    case 1: tile_runs<1, kOne>(t, runs, pos, chunks); return;
    case 2: tile_runs<2, kOne>(t, runs, pos, chunks); return;
    case 3: tile_runs<3, kOne>(t, runs, pos, chunks); return;
    case 4: tile_runs<4, kOne>(t, runs, pos, chunks); return;
    case 5: tile_runs<5, kOne>(t, runs, pos, chunks); return;
    default: tile_runs<6, kOne>(t, runs, pos, chunks); return;
  }
}


}  // namespace

void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par) {
  if (w.layout != PackedWeights::Layout::kRowBlocks) throw_error("gemm_cols_runs needs weights packed as row blocks");
  if (ep.x_max < 0 || ep.x_max > 127 || ow % 8 != 0) throw_error("gemm_cols_runs: activations not proven in [0, 127]");
  const int64_t p = oh * ow;
  if (w.n == 0 || p == 0) return;
  // nonneg_flush of gemm.cc: k-groups whose int16 pair sums (each <= 2 * x_max * max|w|) cannot overflow.
  const int32_t flush = nonneg_flush_of(w, ep.x_max);
  const int shift = exact_shift(ep, ep.bias, w.n, w.k);
  const int64_t mb = w.blocks(), kg = w.kgroups;
  // Units of up to 64 pixels (the panels of the packed path) whose k-groups take about 16 KiB of the quad planes,
  // so that they stay in L1 with the weight blocks while every block runs over them (64-pixel units of a 3x3 layer
  // with 32 channels (72 k-groups) and 32 outputs were 20 % slower), in at most 64 tasks of about 1M multiply-adds.
  // An even number of chunks, at least two: the 16-pixel tiles' (a Conv1d k5 with 256 channels has 320 k-groups:
  // 20 KiB of runs; 3 chunks of a 3x3 layer with 64 channels ran a third of the pixels in the 8-pixel tile).
  const int64_t chunks_per_unit =
      std::clamp<int64_t>((16 << 10) / (32 * std::max<int64_t>(kg, 1)), 2, kPanel / 8) & ~int64_t{1};
  const int64_t unit = 8 * chunks_per_unit;
  const int64_t units = (p + unit - 1) / unit;
  const int64_t tasks = runs_tasks(w, p, units);
  par(static_cast<size_t>(tasks), [&](size_t task) {
    const int64_t u0 = units * static_cast<int64_t>(task) / tasks, u1 = units * static_cast<int64_t>(task + 1) / tasks;
    TileArgs args = call_args(w, ep, ldc);
    args.nonneg_flush = flush;
    args.shift = shift;
    int64_t pos[kPanel / 8];
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t c0 = u * unit, n = std::min<int64_t>(unit, p - c0);
      const int chunks = static_cast<int>(n / 8);  // p is a multiple of 8
      for (int i = 0; i < chunks; ++i) {
        const int64_t q = c0 + 8 * i;
        pos[i] = 4 * ((q / ow) * cols + q % ow);
      }
      args.nr = static_cast<int>(n);
      for (int64_t blk = 0; blk < mb; ++blk) {
        set_weight_block(args, w, blk, out, c0);
        if (flush == 1) tile_runs_any<true>(args, runs, pos, chunks);
        else tile_runs_any<false>(args, runs, pos, chunks);
      }
    }
  });
}

}  // namespace avx2
}  // namespace ortquant::gemm
