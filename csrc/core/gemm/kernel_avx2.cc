// AVX2 micro-kernels without VNNI, five families:
//   - activations known to be in [0, 127] (Epilogue::x_max, integer mode): vpmaddubsw on x and w as they are,
//     int16 sums over as many k-groups as cannot overflow (tile_nonneg below);
//   - weights with |w| <= 64 (PackedWeights::max_abs: 7-bit and narrower quantizers), any activations: vpmaddubsw on
//     the packed bytes x + 128 in [0, 255] as they are, exact because the pair sums stay within int16 (the
//     128 * rowsum(w) correction comes off in the epilogue, as for every path); tile_nonneg<kBiased>;
//   - weights without -128 (PackedWeights::no_min, the usual symmetric quantization): vpmaddubsw on |x| and
//     w * sign(x) (tile_sign, tile_rows_sign below), exact because the pair sums stay within int16;
//   - weights with -128: vpmaddubsw on |x| and w ^ (x < 0 ? -1 : 0) plus a sum of max(-x, 0) per pixel (tile_xsign
//     below) or activation row (rows_sign_pass<kXs>);
//   - otherwise (no such sums given) vpmaddubsw on x ^ 0x80 would saturate its int16 pair sums (255 * -128 * 2 < -32768), so both
//     operands are widened to int16 (u8 zero-extended, s8 sign-extended) and multiplied with vpmaddwd, whose int32
//     pair sums are exact. A lane then holds the sum of k-bytes 0-1 or 2-3 of one column; the two halves are added
//     once at the end (vphaddd). Tile: kMR rows x 8 columns.
#include "core/simd.h"

#include <cstring>

#include "core/gemm/kernels.h"

namespace ortquant::gemm::avx2 {
namespace {

#include "core/gemm/epilogue_avx2.inc"
#include "core/gemm/nonneg_step_avx2.inc"

// Named accumulators (GCC keeps an array of vectors in memory); unused ones are optimized away.
#define OQ_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OQ_DECL(r) __m256i l##r = z, h##r = z;
#define OQ_ROW(r)                                                                                     \
  if constexpr (MR > r) {                                                                             \
    const __m128i a4 = _mm_cvtsi32_si128(load_i32(a + 4 * r));                                        \
    const __m256i av = _mm256_broadcastq_epi64(kCols ? _mm_cvtepi8_epi16(a4) : _mm_cvtepu8_epi16(a4));  \
    l##r = _mm256_add_epi32(l##r, _mm256_madd_epi16(b0, av));                                        \
    h##r = _mm256_add_epi32(h##r, _mm256_madd_epi16(b1, av));                                        \
  }
// [c0 c1 c4 c5 | c2 c3 c6 c7] -> [c0 .. c7]
#define OQ_OUT(r) \
  if constexpr (MR > r) s[r] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(l##r, h##r), 0xD8);

// The widening tile: the RNN recurrence's rows tiles (rnn_common.cc calls tile_rows without the weight facts) and
// any call without the facts the faster kernels need (gemm.cc always passes them: the cols orientation never gets here).
template <bool kCols, int MR>
void tile(const TileArgs& t) {
  const __m256i z = _mm256_setzero_si256();
  for (int c0 = 0; c0 < t.nr; c0 += 8) {
    OQ_ROWS(OQ_DECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
    for (int64_t g = 0; g < t.kgroups; ++g) {
      // 8 lanes x 4 k-bytes: lanes 0-3 and 4-7 widened to 16 int16 each.
      const __m128i braw0 = _mm_load_si128(reinterpret_cast<const __m128i*>(b));
      const __m128i braw1 = _mm_load_si128(reinterpret_cast<const __m128i*>(b + 16));
      const __m256i b0 = kCols ? _mm256_cvtepu8_epi16(braw0) : _mm256_cvtepi8_epi16(braw0);
      const __m256i b1 = kCols ? _mm256_cvtepu8_epi16(braw1) : _mm256_cvtepi8_epi16(braw1);
      OQ_ROWS(OQ_ROW)
      a += kMR * 4;
      b += kPanel * 4;
    }
    __m256i s[MR];
    OQ_ROWS(OQ_OUT)
    const int n = t.nr - c0 < 8 ? t.nr - c0 : 8;
    epilogue8_any<kCols>(t, s, MR, c0, n);
  }
}

// Cols orientation when no weight is -128 (PackedWeights::no_min): vpmaddubsw without saturation. With x the
// activation (the panel byte ^ 0x80) and w the weight, x * w = |x| * (w * sign(x)); |x| <= 128 is a valid u8 and
// w * sign(x) (vpsignb) stays in [-127, 127], so a vpmaddubsw pair sum is at most 2 * 128 * 127 = 32512 < 2^15:
// exact. vpmaddwd with ones then adds the pairs into int32 (the 4 k-bytes of a lane). On this AVX2 core
// vpmaddubsw and vpmaddwd issue on different pipes, where the widening kernel above sends all its work to
// vpmaddwd's. The sums are exact (no +128 offset): each accumulator starts at the row's correction, which the
// shared epilogue subtracts again.
#define OQ_SROW(r)                                                                          \
  if constexpr (MR > r) {                                                                   \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                              \
    const __m256i p = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wb, xv));                   \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(p, ones));                          \
  }
#define OQ_SDECL(r) __m256i acc##r = MR > r ? _mm256_set1_epi32(t.corr[r < MR ? r : 0]) : z;
#define OQ_SOUT(r) \
  if constexpr (MR > r) s[r] = acc##r;

template <int MR>
void tile_sign(const TileArgs& t) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int c0 = 0; c0 < t.nr; c0 += 8) {
    OQ_ROWS(OQ_SDECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
    for (int64_t g = 0; g < t.kgroups; ++g) {
      const __m256i xv = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(b)), flip);
      const __m256i xa = _mm256_abs_epi8(xv);
      OQ_ROWS(OQ_SROW)
      a += kMR * 4;
      b += kPanel * 4;
    }
    __m256i s[MR];
    OQ_ROWS(OQ_SOUT)
    const int n = t.nr - c0 < 8 ? t.nr - c0 : 8;
    epilogue8_any<true>(t, s, MR, c0, n);
  }
}

#undef OQ_SROW
#undef OQ_SDECL
#undef OQ_SOUT

// Cols orientation with -128 weights (the sign kernel's w * sign(x) would wrap at w = -128, x < 0): with s = -1 where
// x < 0 and 0 elsewhere, x * w = |x| * (w ^ s) + |x| * [x < 0], since w ^ s = -w - 1 where x < 0. |x| <= 128 and
// w ^ s in [-128, 127] with |x| <= 127 where s = 0, so a vpmaddubsw pair sum lies in [-32768, 32512]: exact for every
// weight. The second term does not depend on the weight row: TileArgs::xneg holds its sum over k per pixel of the
// panel (panel_negsums), added to every row's accumulator once. vpxor instead of vpsignb per product.
#define OQ_XROW(r)                                                                          \
  if constexpr (MR > r) {                                                                   \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                              \
    const __m256i p = _mm256_maddubs_epi16(xa, _mm256_xor_si256(wb, sg));                   \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(p, ones));                          \
  }
#define OQ_XDECL(r) \
  __m256i acc##r = MR > r ? _mm256_add_epi32(_mm256_set1_epi32(t.corr[r < MR ? r : 0]), neg) : z;
#define OQ_XOUT(r) \
  if constexpr (MR > r) s[r] = acc##r;

template <int MR>
void tile_xsign(const TileArgs& t) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int c0 = 0; c0 < t.nr; c0 += 8) {
    const __m256i neg = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.xneg + c0));  // kPanel entries
    OQ_ROWS(OQ_XDECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
    for (int64_t g = 0; g < t.kgroups; ++g) {
      const __m256i xv = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(b)), flip);
      const __m256i xa = _mm256_abs_epi8(xv);
      const __m256i sg = _mm256_cmpgt_epi8(z, xv);
      OQ_ROWS(OQ_XROW)
      a += kMR * 4;
      b += kPanel * 4;
    }
    __m256i s[MR];
    OQ_ROWS(OQ_XOUT)
    const int n = t.nr - c0 < 8 ? t.nr - c0 : 8;
    epilogue8_any<true>(t, s, MR, c0, n);
  }
}

#undef OQ_XROW
#undef OQ_XDECL
#undef OQ_XOUT

// Cols orientation with non-negative activations (TileArgs::nonneg_flush > 0, from Epilogue::x_max): x = panel
// byte ^ 0x80 is in [0, 127], a valid u8 operand of vpmaddubsw as it is, so the product needs no sign step, and a
// pair sum is at most 2 * 127 * 128 = 32512 in magnitude (exact even with -128 weights). The pair sums are added in
// int16 (vpaddw) for `nonneg_flush` k-groups, a count that cannot overflow int16 (gemm.cc), then widened into the
// int32 accumulators with vpmaddwd(ones): 2 vector ops per 32 multiply-adds in the inner loop where the sign kernel
// needs 4. Integer mode's 2- to 7-bit unsigned activations take this path.
// Tile: 16 pixels x MR <= 6 weight rows where 16 pixels are left, 0.5 weight broadcasts per vpmaddubsw: with
// nonneg_flush > 1 nonneg_step2 (12 int16 accumulators in registers, the int32 sums in memory, touched once per
// widening), with nonneg_flush == 1 one_step2 (12 int32 accumulators in registers); otherwise 8 pixels x MR, 6 int16
// and 6 int32 accumulators in registers.
#define OQ_NDECL(r) __m256i acc##r = MR > r && !kBiased ? _mm256_set1_epi32(t.corr[r < MR ? r : 0]) : z, s##r = z;
#define OQ_NROW(r)                                                                  \
  if constexpr (MR > r) {                                                           \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                      \
    s##r = _mm256_add_epi16(s##r, _mm256_maddubs_epi16(xv, wb));                    \
  }
#define OQ_NFLUSH(r)                                                    \
  if constexpr (MR > r) {                                               \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(s##r, ones));   \
    s##r = z;                                                           \
  }
#define OQ_NOUT(r) \
  if constexpr (MR > r) s[r] = acc##r;

// kOne (nonneg_flush == 1: 8-bit weights with 7-bit activations, whose pair sums may reach 32512): each pair sum is
// widened at once, vpmaddubsw + vpmaddwd(ones) + vpaddd, the sequence of MLAS's u8 x s8 kernel minus its saturation.
#define OQ_N1ROW(r)                                                                                         \
  if constexpr (MR > r) {                                                                                   \
    const __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r));                                              \
    acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wb), ones));               \
  }

#define OQ_N2DECL(r) __m256i l##r = z, h##r = z;
#define OQ_N2ROW(r) \
  if constexpr (MR > r) nonneg_step2(l##r, h##r, x0, x1, a + 4 * r);
#define OQ_N2FLUSH(r)              \
  if constexpr (MR > r) {          \
    widen_into(acc + r, l##r);     \
    widen_into(acc + 6 + r, h##r); \
  }

// Pixels [c0, c0 + 16) of tile_nonneg (flush > 1); x0 and x1 load the k-group's two pixel vectors from b.
template <int MR, bool kBiased, class LoadX>
void nonneg16(const TileArgs& t, int c0, int64_t flush, const LoadX& load_x) {
  const __m256i z = _mm256_setzero_si256();
  // Pixels 0-7 of row r in acc[r], pixels 8-15 in acc[6 + r]; rows >= MR are never read (zeroing all 12 was a
  // rep stos per tile).
  __m256i acc[12];
  for (int r = 0; r < MR; ++r) acc[r] = acc[6 + r] = kBiased ? z : _mm256_set1_epi32(t.corr[r]);
  OQ_ROWS(OQ_N2DECL)
  const auto* a = static_cast<const uint8_t*>(t.a);
  const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
  for (int64_t g0 = 0; g0 < t.kgroups; g0 += flush) {
    const int64_t g1 = t.kgroups - g0 < flush ? t.kgroups : g0 + flush;
    for (int64_t g = g0; g < g1; ++g) {
      const __m256i x0 = kBiased ? load_x(b) : load_flip80(b), x1 = kBiased ? load_x(b + 32) : load_flip80(b + 32);
      OQ_ROWS(OQ_N2ROW)
      a += kMR * 4;
      b += kPanel * 4;
    }
    OQ_ROWS(OQ_N2FLUSH)
  }
  epilogue8_any<true>(t, acc, MR, c0, 8);
  epilogue8_any<true>(t, acc + 6, MR, c0 + 8, 8);
}

// Pixels [c0, c0 + 16) of tile_nonneg<kOne>. Not inlined: inside tile_nonneg GCC keeps the 8-pixel loop's
// registers (ones, the flip mask) live across this loop and spills an accumulator on every k-group.
template <int MR, bool kBiased>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void one_panel16(const TileArgs& t, int c0) {
  const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
  __m256i acc[12];
  one16<MR, kBiased>(
      t,
      [b](int64_t g, __m256i& x0, __m256i& x1) {
        const uint8_t* q = b + g * (kPanel * 4);
        if constexpr (kBiased) {
          x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
          x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32));
        } else {
          x0 = load_flip80(q);
          x1 = load_flip80(q + 32);
        }
      },
      acc);
  epilogue8_any<true>(t, acc, MR, c0, 8);
  epilogue8_any<true>(t, acc + 6, MR, c0 + 8, 8);
}

// kBiased (TileArgs::biased_flush > 0, any activations, |w| <= 64): the same schedules on the panel bytes x + 128 as
// they are (no xor), the accumulators starting at 0 instead of the correction: their sum is sum (x + 128) w =
// sum x w + 128 rowsum(w), from which the shared epilogue subtracts the correction.
template <int MR, bool kOne, bool kBiased = false>
void tile_nonneg(const TileArgs& t) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = kBiased ? z : _mm256_set1_epi8(static_cast<char>(0x80));
  const int64_t flush = kBiased ? t.biased_flush : t.nonneg_flush;
  auto load_x = [&](const uint8_t* p) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
    return kBiased ? v : _mm256_xor_si256(v, flip);
  };
  for (int c0 = 0; c0 < t.nr; c0 += 8) {
    if (t.nr - c0 >= 16) {
      if constexpr (kOne) {
        one_panel16<MR, kBiased>(t, c0);
        c0 += 8;
        continue;
      } else if (flush > 1) {
        nonneg16<MR, kBiased>(t, c0, flush, load_x);
        c0 += 8;
        continue;
      }
    }
    OQ_ROWS(OQ_NDECL)
    const auto* a = static_cast<const uint8_t*>(t.a);
    const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
    if constexpr (kOne) {
      for (int64_t g = 0; g < t.kgroups; ++g) {
        const __m256i xv = load_x(b);
        OQ_ROWS(OQ_N1ROW)
        a += kMR * 4;
        b += kPanel * 4;
      }
    } else {
      for (int64_t g0 = 0; g0 < t.kgroups; g0 += flush) {
        const int64_t g1 = t.kgroups - g0 < flush ? t.kgroups : g0 + flush;
        for (int64_t g = g0; g < g1; ++g) {
          const __m256i xv = load_x(b);
          OQ_ROWS(OQ_NROW)
          a += kMR * 4;
          b += kPanel * 4;
        }
        OQ_ROWS(OQ_NFLUSH)
      }
    }
    __m256i s[MR];
    OQ_ROWS(OQ_NOUT)
    const int n = t.nr - c0 < 8 ? t.nr - c0 : 8;
    epilogue8_any<true>(t, s, MR, c0, n);
  }
}

#undef OQ_NDECL
#undef OQ_NROW
#undef OQ_NFLUSH
#undef OQ_NOUT
#undef OQ_N1ROW
#undef OQ_N2DECL
#undef OQ_N2ROW
#undef OQ_N2FLUSH

// Rows orientation (activations broadcast, weights in lanes), weights without -128: the same exact vpmaddubsw
// product, the activation's |x| and sign taken once per row and k-group and used for the weight vectors.
// kWide: 16 lanes (two 8-lane weight vectors) x R <= 3 rows per pass, 6 accumulators, no spills; otherwise (8 or
// fewer weight rows left) 8 lanes x R <= 6 rows, so that a narrow GEMM (LinearInt with few output features) neither
// computes 8 idle lanes nor runs the epilogue for 3 rows at a time. Accumulators start at the lanes' corrections.
// kOne: activations in [0, 127] with nonneg_flush == 1 (8-bit weights): the product is vpmaddubsw(x, w) as it is,
// widened at once, in the same schedule.
// kBiased (with kOne; TileArgs::biased_flush == 1): the activation bytes x + 128 as they are, accumulators from 0
// (tile_nonneg's kBiased).
// kXs (weights with -128, TileArgs::xneg set): tile_xsign's product, |x| * (w ^ s) with s = (x < 0 ? -1 : 0), each
// row's accumulators starting at its sum of max(-x, 0) on top of the correction.
template <int R, bool kWide, bool kOne = false, bool kBiased = false, bool kXs = false>
void rows_sign_pass(const TileArgs& t, int r0, int c0) {
  static_assert(R >= 1 && R <= (kWide ? 3 : 6), "accumulators must fit the 16 ymm registers");
  static_assert(kOne || !kBiased, "the biased product is the kOne schedule");
  static_assert(!(kOne && kXs), "kXs is a signed product");
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(kBiased ? 0 : 0x80));
  const __m256i cl = kBiased ? _mm256_setzero_si256()
                             : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.corr + c0));  // padded
  const __m256i ch = kWide && !kBiased ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.corr + c0 + 8)) : cl;
  __m256i l0 = cl, l1 = cl, l2 = cl, l3 = cl, l4 = cl, l5 = cl;
  __m256i h0 = ch, h1 = ch, h2 = ch;
  [[maybe_unused]] __m256i h3 = ch, h4 = ch, h5 = ch;  // named for OQ_RX only (kWide has 3 rows)
  if constexpr (kXs) {
#define OQ_RX(i)                                                       \
  if constexpr (R > i) {                                               \
    const __m256i n = _mm256_set1_epi32(t.xneg[r0 + i]);               \
    l##i = _mm256_add_epi32(l##i, n);                                  \
    if constexpr (kWide && i < 3) h##i = _mm256_add_epi32(h##i, n);    \
  }
    OQ_RX(0) OQ_RX(1) OQ_RX(2) OQ_RX(3) OQ_RX(4) OQ_RX(5)
#undef OQ_RX
  }
  [[maybe_unused]] const __m256i zero = _mm256_setzero_si256();
  const auto* a = static_cast<const uint8_t*>(t.a) + 4 * r0;
  const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
  for (int64_t g = 0; g < t.kgroups; ++g) {
    const __m256i bl = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i bh = kWide ? _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32)) : bl;
    // The signed operand: w itself (kOne), w * sign(x), or w ^ (x < 0 ? -1 : 0) (kXs).
    auto signed_w = [&](__m256i w, __m256i x, __m256i sg) {
      return kOne ? w : (kXs ? _mm256_xor_si256(w, sg) : _mm256_sign_epi8(w, x));
    };
#define OQ_RS(i)                                                                               \
  if constexpr (R > i) {                                                                       \
    const __m256i xb = _mm256_set1_epi32(load_i32(a + 4 * i));                                 \
    const __m256i x = kBiased ? xb : _mm256_xor_si256(xb, flip);                               \
    const __m256i xa = kOne ? x : _mm256_abs_epi8(x);                                          \
    const __m256i sg = kXs ? _mm256_cmpgt_epi8(zero, x) : x;                                   \
    const __m256i wl = signed_w(bl, x, sg);                                                    \
    l##i = _mm256_add_epi32(l##i, _mm256_madd_epi16(_mm256_maddubs_epi16(xa, wl), ones));      \
    if constexpr (kWide) {                                                                     \
      const __m256i wh = signed_w(bh, x, sg);                                                  \
      h##i = _mm256_add_epi32(h##i, _mm256_madd_epi16(_mm256_maddubs_epi16(xa, wh), ones));    \
    }                                                                                          \
  }
#define OQ_RS_NARROW(i)                                                                        \
  if constexpr (!kWide && R > i) {                                                             \
    const __m256i xb = _mm256_set1_epi32(load_i32(a + 4 * i));                                 \
    const __m256i x = kBiased ? xb : _mm256_xor_si256(xb, flip);                               \
    const __m256i xa = kOne ? x : _mm256_abs_epi8(x);                                          \
    const __m256i sg = kXs ? _mm256_cmpgt_epi8(zero, x) : x;                                   \
    const __m256i wl = signed_w(bl, x, sg);                                                    \
    l##i = _mm256_add_epi32(l##i, _mm256_madd_epi16(_mm256_maddubs_epi16(xa, wl), ones));      \
  }
    OQ_RS(0) OQ_RS(1) OQ_RS(2) OQ_RS_NARROW(3) OQ_RS_NARROW(4) OQ_RS_NARROW(5)
#undef OQ_RS
#undef OQ_RS_NARROW
    a += kMR * 4;
    b += kPanel * 4;
  }
  TileArgs tt = t;
  tt.out = static_cast<char*>(t.out) + r0 * t.ldc * static_cast<int64_t>(out_elem_size(t.ep->kind));
  const __m256i sl[6] = {l0, l1, l2, l3, l4, l5}, sh[3] = {h0, h1, h2};
  const int nl = t.nr - c0 < 8 ? t.nr - c0 : 8;
  epilogue8_any<false>(tt, sl, R, c0, nl);
  if (kWide && t.nr - c0 > 8) epilogue8_any<false>(tt, sh, R, c0 + 8, t.nr - c0 - 8 < 8 ? t.nr - c0 - 8 : 8);
}

// Rows orientation with activations in [0, 127] (TileArgs::nonneg_flush > 0): vpmaddubsw(x, w) as it is, int16 sums
// for nonneg_flush k-groups, then one widening into the int32 sums, which live in memory (touched once per
// widening). Lanes and rows per pass as in rows_sign_pass.
// kBiased: TileArgs::biased_flush k-groups per widening, on the activation bytes x + 128 as they are, from 0.
template <int R, bool kWide, bool kBiased = false>
void rows_nonneg_pass(const TileArgs& t, int r0, int c0) {
  static_assert(R >= 1 && R <= (kWide ? 3 : 6), "accumulators must fit the 16 ymm registers");
  const __m256i z = _mm256_setzero_si256();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(kBiased ? 0 : 0x80));
  const __m256i cl = kBiased ? z : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.corr + c0));  // padded
  const __m256i ch = kWide && !kBiased ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.corr + c0 + 8)) : cl;
  __m256i accl[6], acch[3];
  for (int i = 0; i < R; ++i) accl[i] = cl;
  for (int i = 0; i < (kWide ? R : 0); ++i) acch[i] = ch;
  __m256i l0 = z, l1 = z, l2 = z, l3 = z, l4 = z, l5 = z, h0 = z, h1 = z, h2 = z;
  [[maybe_unused]] __m256i h3 = z, h4 = z, h5 = z;  // named for the macro only (kWide has 3 rows)
  const auto* a = static_cast<const uint8_t*>(t.a) + 4 * r0;
  const auto* b = static_cast<const uint8_t*>(t.b) + c0 * 4;
  const int64_t flush = kBiased ? t.biased_flush : t.nonneg_flush;
  for (int64_t g0 = 0; g0 < t.kgroups; g0 += flush) {
    const int64_t g1 = t.kgroups - g0 < flush ? t.kgroups : g0 + flush;
    for (int64_t g = g0; g < g1; ++g) {
      const __m256i bl = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
      const __m256i bh = kWide ? _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32)) : bl;
#define OQ_RN(i)                                                                          \
  if constexpr (R > i) {                                                                  \
    const __m256i xb = _mm256_set1_epi32(load_i32(a + 4 * i));                            \
    const __m256i x = kBiased ? xb : _mm256_xor_si256(xb, flip);                          \
    l##i = _mm256_add_epi16(l##i, _mm256_maddubs_epi16(x, bl));                           \
    if constexpr (kWide && i < 3) h##i = _mm256_add_epi16(h##i, _mm256_maddubs_epi16(x, bh)); \
  }
      OQ_RN(0) OQ_RN(1) OQ_RN(2) OQ_RN(3) OQ_RN(4) OQ_RN(5)
#undef OQ_RN
      a += kMR * 4;
      b += kPanel * 4;
    }
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sl[6] = {l0, l1, l2, l3, l4, l5}, sh[3] = {h0, h1, h2};
    for (int i = 0; i < R; ++i) accl[i] = _mm256_add_epi32(accl[i], _mm256_madd_epi16(sl[i], ones));
    for (int i = 0; i < (kWide ? R : 0); ++i) acch[i] = _mm256_add_epi32(acch[i], _mm256_madd_epi16(sh[i], ones));
    l0 = l1 = l2 = l3 = l4 = l5 = h0 = h1 = h2 = z;
  }
  TileArgs tt = t;
  tt.out = static_cast<char*>(t.out) + r0 * t.ldc * static_cast<int64_t>(out_elem_size(t.ep->kind));
  const int nl = t.nr - c0 < 8 ? t.nr - c0 : 8;
  epilogue8_any<false>(tt, accl, R, c0, nl);
  if (kWide && t.nr - c0 > 8) epilogue8_any<false>(tt, acch, R, c0 + 8, t.nr - c0 - 8 < 8 ? t.nr - c0 - 8 : 8);
}

// tile_rows_sign's schedule with rows_nonneg_pass (kNonneg; rows_sign_pass<kOne> when nonneg_flush == 1) or
// rows_sign_pass.
// kBiased (with kNonneg): the schedules of tile_nonneg<kBiased>, TileArgs::biased_flush k-groups per widening.
// kXs (not kNonneg): rows_sign_pass<kXs>, for weights with -128 (TileArgs::xneg set).
template <bool kNonneg, bool kOne = false, bool kBiased = false, bool kXs = false>
void tile_rows_exact(const TileArgs& t) {
  if constexpr (kNonneg && !kOne) {
    if ((kBiased ? t.biased_flush : t.nonneg_flush) == 1) {
      tile_rows_exact<true, true, kBiased>(t);
      return;
    }
  }
  for (int c0 = 0; c0 < t.nr; c0 += 16) {
    if (t.nr - c0 <= 8) {  // the last 8 or fewer weight rows: 8 lanes, up to 6 activation rows per pass
      for (int r0 = 0; r0 < t.mr; r0 += 6) {
        switch (t.mr - r0) {
#define OQ_PASS(R, W)                                                                     \
  (kOne ? rows_sign_pass<R, W, true, kBiased>(t, r0, c0)                                    \
        : (kNonneg ? rows_nonneg_pass<R, W, kBiased>(t, r0, c0)                             \
                   : rows_sign_pass<R, W, false, false, kXs>(t, r0, c0)))
          case 1: OQ_PASS(1, false); break;
          case 2: OQ_PASS(2, false); break;
          case 3: OQ_PASS(3, false); break;
          case 4: OQ_PASS(4, false); break;
          case 5: OQ_PASS(5, false); break;
          default: OQ_PASS(6, false); break;
        }
      }
      continue;
    }
    for (int r0 = 0; r0 < t.mr; r0 += 3) {
      switch (t.mr - r0) {
        case 1: OQ_PASS(1, true); break;
        case 2: OQ_PASS(2, true); break;
        default: OQ_PASS(3, true); break;
#undef OQ_PASS
      }
    }
  }
}

#undef OQ_ROWS
#undef OQ_DECL
#undef OQ_ROW
#undef OQ_OUT

template <bool kCols>
void tile_any(const TileArgs& t) {
  static_assert(kMR == 6, "tile shapes below assume kMR == 6");
  if constexpr (!kCols) {
    if (t.nonneg_flush > 0) {
      tile_rows_exact<true>(t);
      return;
    }
    if (t.biased_flush > 0) {
      tile_rows_exact<true, false, true>(t);
      return;
    }
    if (t.no_min) {
      tile_rows_exact<false>(t);
      return;
    }
    if (t.xneg != nullptr) {
      tile_rows_exact<false, false, false, true>(t);
      return;
    }
  }
  if constexpr (kCols) {
    if (t.nonneg_flush > 0) {
      if (t.nonneg_flush == 1) {
        switch (t.mr) {
          case 1: tile_nonneg<1, true>(t); return;
          case 2: tile_nonneg<2, true>(t); return;
          case 3: tile_nonneg<3, true>(t); return;
          case 4: tile_nonneg<4, true>(t); return;
          case 5: tile_nonneg<5, true>(t); return;
          default: tile_nonneg<6, true>(t); return;
        }
      }
      switch (t.mr) {
        case 1: tile_nonneg<1, false>(t); return;
        case 2: tile_nonneg<2, false>(t); return;
        case 3: tile_nonneg<3, false>(t); return;
        case 4: tile_nonneg<4, false>(t); return;
        case 5: tile_nonneg<5, false>(t); return;
        default: tile_nonneg<6, false>(t); return;
      }
    }
    if (t.biased_flush > 0) {
      if (t.biased_flush == 1) {
        switch (t.mr) {
          case 1: tile_nonneg<1, true, true>(t); return;
          case 2: tile_nonneg<2, true, true>(t); return;
          case 3: tile_nonneg<3, true, true>(t); return;
          case 4: tile_nonneg<4, true, true>(t); return;
          case 5: tile_nonneg<5, true, true>(t); return;
          default: tile_nonneg<6, true, true>(t); return;
        }
      }
      switch (t.mr) {
        case 1: tile_nonneg<1, false, true>(t); return;
        case 2: tile_nonneg<2, false, true>(t); return;
        case 3: tile_nonneg<3, false, true>(t); return;
        case 4: tile_nonneg<4, false, true>(t); return;
        case 5: tile_nonneg<5, false, true>(t); return;
        default: tile_nonneg<6, false, true>(t); return;
      }
    }
    if (!t.no_min && t.xneg != nullptr) {
      switch (t.mr) {
        case 1: tile_xsign<1>(t); return;
        case 2: tile_xsign<2>(t); return;
        case 3: tile_xsign<3>(t); return;
        case 4: tile_xsign<4>(t); return;
        case 5: tile_xsign<5>(t); return;
        default: tile_xsign<6>(t); return;
      }
    }
    if (t.no_min) {
      switch (t.mr) {
        case 1: tile_sign<1>(t); return;
        case 2: tile_sign<2>(t); return;
        case 3: tile_sign<3>(t); return;
        case 4: tile_sign<4>(t); return;
        case 5: tile_sign<5>(t); return;
        default: tile_sign<6>(t); return;
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

void panel_negsums(const uint8_t* panel, int64_t kgroups, int32_t* out) {
  // max(-x, 0) = 128 - byte where the panel byte x + 128 is below 128 (saturating subtract); 4 per lane and k-group,
  // so int16 pair sums (<= 256 each) are added for 64 k-groups (<= 16384) before widening.
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int c0 = 0; c0 < kPanel; c0 += 8) {
    __m256i sum = _mm256_setzero_si256();
    for (int64_t g0 = 0; g0 < kgroups; g0 += 64) {
      const int64_t g1 = kgroups - g0 < 64 ? kgroups : g0 + 64;
      __m256i s16 = _mm256_setzero_si256();
      for (int64_t g = g0; g < g1; ++g) {
        const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + (g * kPanel + c0) * 4));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_subs_epu8(flip, u), ones8));
      }
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c0), sum);
  }
}

void tile_negsums(const uint8_t* tile, int64_t kgroups, int32_t* out) {
  // The tile is [kgroups][kMR][4]: 4 k-groups are 96 bytes, three vectors whose int32 lanes (4 bytes each) belong to
  // rows 0-5,0-1 / 2-5,0-3 / 4-5,0-5; max(-x, 0) = 128 - byte below 128 (saturating subtract), 4 bytes per lane
  // summed by vpmaddubsw (pairs <= 256) and vpmaddwd.
  static_assert(kMR == 6, "the lane pattern below assumes 6 rows");
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0;
  int64_t g = 0;
  for (; g + 4 <= kgroups; g += 4) {
    const auto* p = reinterpret_cast<const __m256i*>(tile + g * kMR * 4);
    auto part = [&](const __m256i* q) {
      return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_subs_epu8(flip, _mm256_loadu_si256(q)), ones8), ones);
    };
    s0 = _mm256_add_epi32(s0, part(p));
    s1 = _mm256_add_epi32(s1, part(p + 1));
    s2 = _mm256_add_epi32(s2, part(p + 2));
  }
  alignas(32) int32_t lanes[24];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 8), s1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 16), s2);
  for (int r = 0; r < kMR; ++r) out[r] = lanes[r] + lanes[r + 6] + lanes[r + 12] + lanes[r + 18];
  for (; g < kgroups; ++g)
    for (int r = 0; r < kMR; ++r)
      for (int j = 0; j < 4; ++j) {
        const int v = tile[(g * kMR + r) * 4 + j];
        out[r] += v < 128 ? 128 - v : 0;
      }
}

void tile_rows(const TileArgs& t) { tile_any<false>(t); }
void tile_cols(const TileArgs& t) { tile_any<true>(t); }

}  // namespace ortquant::gemm::avx2
