// The channels-last depthwise convolution, AVX2 (dwnhwc.h; flags chosen by this file's name in CMakeLists.txt).
// Per task: the padded NHWC block by 16 x 16 byte transposes, sign-extended once to int16 (32 bytes a pixel), then
// per output pixel and pair of taps one vpunpck{l,h}wd of the two taps' 16 channels and two vpmaddwd into 2 x 8
// int32 accumulators (channels in vpunpck's lane order 0-3 8-11 | 4-7 12-15, which the weights' `lanes` copy
// follows and the saturating packs of the epilogue undo), the ymm epilogue of the GEMM (epilogue_avx2.inc, the
// same float64 arithmetic as the scalar store) into a 16-pixel tile, and the tile transposed into the NCHW output
// (16 consecutive output pixels of a plane are contiguous). Widening each input pixel once instead of once per tap
// cuts the shuffles per tap pair from 4 to 2.
// 3 x 3 kernels with stride 2 (dw_rows_s2) take the row kernel below instead, with the same tasks and epilogue:
// there the block's byte transposes, one per input pixel while only a quarter of the pixels are outputs, were 42%
// of the time.
#include "core/simd.h"

#include <algorithm>
#include <cstring>

#include "core/conv/dwnhwc.h"
#include "core/gemm/kernels.h"

namespace ortquant::conv::avx2 {
namespace {

using gemm::Epilogue;
using gemm::OutKind;
using gemm::TileArgs;
using gemm::out_elem_size;
#include "core/gemm/epilogue_avx2.inc"

// 16 rows of 16 bytes -> their transpose, in place.
inline void transpose16(__m128i (&r)[16]) {
  __m128i t[16], u[16], v[8], w[8];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // rows 4g .. 4g+3: t[4g], t[4g+1] (rows 4g, 4g+1), t[4g+2], t[4g+3]
    u[4 * g + 0] = _mm_unpacklo_epi16(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm_unpackhi_epi16(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm_unpacklo_epi16(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm_unpackhi_epi16(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int k = 0; k < 4; ++k) {  // u[k]: rows 0-3 of pixels 4k .. 4k+3; u[4+k]: rows 4-7
    v[2 * k] = _mm_unpacklo_epi32(u[k], u[4 + k]);
    v[2 * k + 1] = _mm_unpackhi_epi32(u[k], u[4 + k]);
    w[2 * k] = _mm_unpacklo_epi32(u[8 + k], u[12 + k]);
    w[2 * k + 1] = _mm_unpackhi_epi32(u[8 + k], u[12 + k]);
  }
  for (int k = 0; k < 8; ++k) {  // v[k]: rows 0-7 of pixels 2k, 2k+1; w[k]: rows 8-15
    r[2 * k] = _mm_unpacklo_epi64(v[k], w[k]);
    r[2 * k + 1] = _mm_unpackhi_epi64(v[k], w[k]);
  }
}

// Padded rows [pr0, pr0 + prn) of the zero-padded NHWC block of channels [c0, c0 + 16) of image img, as int16
// (16 channels = 32 bytes a pixel; padded row pr is input row pr - pt).
void build_block(const DwNhwcArgs& d, int64_t img, int64_t c0, int64_t pr0, int64_t prn, int16_t* buf) {
  const ConvAttrs& a = d.a;
  const int64_t row = d.wp * kDwBlock;  // elements
  const int64_t nc = std::min<int64_t>(kDwBlock, d.c - c0);
  const int8_t* src = d.x + (img * d.c + c0) * d.h * d.w;
  const int64_t plane = d.h * d.w;
  const __m256i zero = _mm256_setzero_si256();
  auto put = [](int16_t* px, __m128i v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(px), _mm256_cvtepi8_epi16(v));
  };
  for (int64_t i = 0; i < prn; ++i) {
    int16_t* dst = buf + i * row;
    const int64_t y = pr0 + i - a.pt;
    if (y < 0 || y >= d.h) {  // a padding row
      std::memset(dst, 0, static_cast<size_t>(row) * 2);
      continue;
    }
    // The left and right padding pixels (a few 32-byte stores; no memset call per row).
    for (int64_t p = 0; p < a.pl; ++p) _mm256_store_si256(reinterpret_cast<__m256i*>(dst + p * kDwBlock), zero);
    for (int64_t p = a.pl + d.w; p < d.wp; ++p)
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + p * kDwBlock), zero);
    dst += a.pl * kDwBlock;
    const int8_t* s = src + y * d.w;
    int64_t x = 0;
    for (; x + 16 <= d.w; x += 16) {
      __m128i r[16];
      for (int ch = 0; ch < 16; ++ch)
        r[ch] = ch < nc ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + ch * plane + x)) : _mm_setzero_si128();
      transpose16(r);
      for (int p = 0; p < 16; ++p) put(dst + (x + p) * kDwBlock, r[p]);
    }
    if (x < d.w && d.w >= 16) {  // the last 16 columns again, overlapping (same values)
      x = d.w - 16;
      __m128i r[16];
      for (int ch = 0; ch < 16; ++ch)
        r[ch] = ch < nc ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + ch * plane + x)) : _mm_setzero_si128();
      transpose16(r);
      for (int p = 0; p < 16; ++p) put(dst + (x + p) * kDwBlock, r[p]);
      x = d.w;
    }
    if (x < d.w) {  // a row narrower than 16: through a zero-padded copy
      alignas(16) int8_t tmp[16][16] = {};
      for (int64_t ch = 0; ch < nc; ++ch) std::memcpy(tmp[ch], s + ch * plane, static_cast<size_t>(d.w));
      __m128i r[16];
      for (int ch = 0; ch < 16; ++ch) r[ch] = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp[ch]));
      transpose16(r);
      for (int64_t p = 0; p < d.w; ++p) put(dst + p * kDwBlock, r[p]);
    }
  }
}

// 8 x 8 int32: rows i of `in` (stride 16 elements) -> columns of `out` (stride `plane` elements).
inline void transpose8x8_epi32(const int32_t* in, int32_t* out, int64_t plane) {
  __m256i r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(in + i * kDwBlock));
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    r[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // r[k] (k < 4): column k of rows 0-3 in the low 128-bit half, column 4 + k in the high half; r[4 + k]: rows 4-7.
  for (int k = 0; k < 4; ++k) {
    const __m256i lo = _mm256_permute2x128_si256(r[k], r[4 + k], 0x20);
    const __m256i hi = _mm256_permute2x128_si256(r[k], r[4 + k], 0x31);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k * plane), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (4 + k) * plane), hi);
  }
}

// 16 channels x 16 pixels of output elements (tile[pixel][channel]) -> out planes (stride `plane` elements).
template <OutKind K>
inline void store_tile(const char* tile, int64_t np, int64_t nc, char* out, int64_t plane) {
  constexpr int64_t es = K == OutKind::kInt8 ? 1 : (K == OutKind::kInt16 ? 2 : 4);
  if constexpr (es == 1) {
    if (np == 16) {
      __m128i r[16];
      for (int p = 0; p < 16; ++p) r[p] = _mm_load_si128(reinterpret_cast<const __m128i*>(tile + p * 16));
      transpose16(r);
      for (int64_t ch = 0; ch < nc; ++ch) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + ch * plane), r[ch]);
      return;
    }
  }
  if constexpr (es == 4) {
    if (np == 16 && nc == 16) {
      const int32_t* t = reinterpret_cast<const int32_t*>(tile);
      int32_t* o = reinterpret_cast<int32_t*>(out);
      for (int pb = 0; pb < 2; ++pb)
        for (int cb = 0; cb < 2; ++cb) transpose8x8_epi32(t + pb * 8 * kDwBlock + cb * 8, o + cb * 8 * plane + pb * 8, plane);
      return;
    }
  }
  for (int64_t ch = 0; ch < nc; ++ch) {
    char* o = out + ch * plane * es;
    for (int64_t p = 0; p < np; ++p) std::memcpy(o + p * es, tile + (p * kDwBlock + ch) * es, es);
  }
}

// Slot i of the accumulators' lane order holds channel kLane[i] (DwNhwcWeights::lanes).
constexpr int kLane[kDwBlock] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// Output rows [u.y0, u.y1) of block u.blk of image u.img; with a sink, its sums go to `sums` ([16][rows][ow]) and
// then to the sink channel by channel.
template <OutKind K, int P>
void block(const DwNhwcArgs& d, const DwUnit& u, int16_t* buf, char* tile, int32_t* sums) {
  constexpr int64_t es = K == OutKind::kInt8 ? 1 : (K == OutKind::kInt16 ? 2 : 4);
  const ConvAttrs& a = d.a;
  const int64_t img = u.img, blk = u.blk, c0 = blk * kDwBlock, nc = std::min<int64_t>(kDwBlock, d.c - c0);
  const int64_t pairs = P > 0 ? P : d.wts->pairs;
  const int64_t pr0 = u.y0 * a.sh, rows = u.y1 - u.y0;
  build_block(d, img, c0, pr0, dw_band_in_rows(d, rows), buf);
  const __m256i* wv = reinterpret_cast<const __m256i*>(d.wts->block_lanes(blk));  // [pair][2] ymm, lane order
  const Epilogue& ep = *d.ep;
  const Consts8 cst(ep);
  const bool divide = ep.fdiv != 0.0;
  __m256d bias[4];  // natural channel order (the float64 epilogue runs on re-ordered sums)
  {
    alignas(32) double b[16] = {};
    for (int64_t ch = 0; ch < nc; ++ch) b[ch] = ep.bias ? static_cast<double>(ep.bias[c0 + ch]) : 0.0;
    for (int i = 0; i < 4; ++i) bias[i] = _mm256_load_pd(b + 4 * i);
  }
  // The integer epilogue (d.shift >= 0): bias + rounding half folded into one vector per 8 lanes, lane order.
  const int shift = d.shift;
  __m256i ibias0 = _mm256_setzero_si256(), ibias1 = ibias0, ilo = ibias0, ihi = ibias0;
  if (shift >= 0) {
    alignas(32) int32_t b[16] = {};
    const int32_t half = shift > 0 ? int32_t{1} << (shift - 1) : 0;
    for (int i = 0; i < kDwBlock; ++i) b[i] = (ep.bias && kLane[i] < nc ? ep.bias[c0 + kLane[i]] : 0) + half;
    ibias0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    ibias1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8));
    ilo = _mm256_set1_epi32(static_cast<int32_t>(ep.lo));
    ihi = _mm256_set1_epi32(static_cast<int32_t>(ep.hi));
  }
  const int64_t* off = d.tap_off;
  const bool to_sink = d.sink != nullptr;
  // Output pixels [0, npix) of this band, written at out (channel planes `plane` elements apart).
  const int64_t npix = rows * d.ow;
  const int64_t plane = to_sink ? npix : d.oh * d.ow;
  char* out = to_sink ? reinterpret_cast<char*>(sums)
                      : static_cast<char*>(d.out) + ((img * d.c + c0) * d.oh * d.ow + u.y0 * d.ow) * es;
  int64_t oy = u.y0, ox = 0;
  for (int64_t p0 = 0; p0 < npix; p0 += 16) {
    const int64_t np = std::min<int64_t>(16, npix - p0);
    for (int64_t p = 0; p < np; ++p) {
      const int16_t* base = buf + ((oy * a.sh - pr0) * d.wp + ox * a.sw) * kDwBlock;
      __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();  // lanes 0-3 8-11 | 4-7 12-15
      for (int64_t q = 0; q < pairs; ++q) {
        const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(base + off[2 * q]));
        const __m256i xb = _mm256_load_si256(reinterpret_cast<const __m256i*>(base + off[2 * q + 1]));
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), _mm256_load_si256(wv + 2 * q)));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), _mm256_load_si256(wv + 2 * q + 1)));
      }
      char* tp = tile + p * kDwBlock * es;
      if constexpr (K == OutKind::kInt8 || K == OutKind::kInt16 || K == OutKind::kInt32) {
        if (shift >= 0) {
          const __m128i sh = _mm_cvtsi32_si128(shift);
          __m256i q0 = _mm256_sra_epi32(_mm256_add_epi32(acc0, ibias0), sh);
          __m256i q1 = _mm256_sra_epi32(_mm256_add_epi32(acc1, ibias1), sh);
          q0 = _mm256_min_epi32(_mm256_max_epi32(q0, ilo), ihi);
          q1 = _mm256_min_epi32(_mm256_max_epi32(q1, ilo), ihi);
          if constexpr (K == OutKind::kInt32) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(tp), _mm256_permute2x128_si256(q0, q1, 0x20));
            _mm256_store_si256(reinterpret_cast<__m256i*>(tp + 32), _mm256_permute2x128_si256(q0, q1, 0x31));
          } else {
            // In range already, so the saturating packs are exact; packs works per 128-bit lane, which puts the
            // lane order back into channel order 0-7 | 8-15.
            const __m256i w16 = _mm256_packs_epi32(q0, q1);
            if constexpr (K == OutKind::kInt16) {
              _mm256_store_si256(reinterpret_cast<__m256i*>(tp), w16);
            } else {
              const __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
              _mm_store_si128(reinterpret_cast<__m128i*>(tp), b8);
            }
          }
          if (++ox == d.ow) ox = 0, ++oy;
          continue;
        }
      }
      const __m256i n0 = _mm256_permute2x128_si256(acc0, acc1, 0x20);  // channels 0-7
      const __m256i n1 = _mm256_permute2x128_si256(acc0, acc1, 0x31);  // channels 8-15
      store8<K>(cst, divide, n0, bias[0], bias[1], tp, 8);
      store8<K>(cst, divide, n1, bias[2], bias[3], tp + 8 * es, 8);
      if (++ox == d.ow) ox = 0, ++oy;
    }
    store_tile<K>(tile, np, nc, out + p0 * es, plane);
  }
  if (to_sink)
    for (int64_t ch = 0; ch < nc; ++ch) (*d.sink)(img, c0 + ch, u.y0, u.y1, sums + ch * npix);
}

// ---- The stride-2 row kernel (dw_rows_s2 in dwnhwc.h) -------------------------------------------------------

// Input row s (w bytes) -> bytes [0, w) of r.
inline void copy_row(const int8_t* s, int64_t w, int8_t* r) {
  if (w < 16) {
    std::memcpy(r, s, static_cast<size_t>(w));
    return;
  }
  int64_t x = 0;
  for (; x + 16 <= w; x += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r + x), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + x)));
  if (x < w)  // the last 16 bytes again, overlapping (same values)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r + w - 16),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + w - 16)));
}

// 16 bytes at p, sign-extended: the int16 pairs of padded columns (p, p + 1), (p + 2, p + 3), ...
inline __m256i pairs16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The epilogue of 8 sums of one channel (8 consecutive outputs at o, n of them written). kShift: the int32 shift
// requantization (DwNhwcArgs::shift >= 0); kClamp: clamp to [lo, hi] first (not needed when [lo, hi] is the whole
// output type: the saturating packs clamp then).
struct RowEpilogue {
  Consts8 cst;
  bool divide;
  __m256i bh, lo, hi;
  __m128i sh;
  __m256d bd;
};

template <OutKind K, bool kShift, bool kClamp>
inline void row_store8(const RowEpilogue& e, __m256i acc, char* o, int n) {
  if constexpr (kShift) {
    __m256i q = _mm256_sra_epi32(_mm256_add_epi32(acc, e.bh), e.sh);
    if constexpr (kClamp) q = _mm256_min_epi32(_mm256_max_epi32(q, e.lo), e.hi);
    store_ints8<K>(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), o, n);
  } else {
    store8<K>(e.cst, e.divide, acc, e.bd, e.bd, o, n);
  }
}

// The padded row 2 oy + 2 of output row oy is row 0 of output row oy + 1, so each 8-column block walks down the
// plane keeping that row's two vectors: 4 loads and 6 vpmaddwd per 8 outputs.
// The blocks run right to left: the short last block of a row writes its 8 lanes into the start of the next row,
// which the blocks to its left write after it (only the plane's last row stores exactly n).
template <OutKind K, bool kShift, bool kClamp>
void walk_k3s2(const RowEpilogue& e, const __m256i* wv, const int8_t* plane, int64_t rs, int64_t oh, int64_t ow,
               char* out) {
  constexpr int64_t es = K == OutKind::kInt8 ? 1 : (K == OutKind::kInt16 ? 2 : 4);
  const __m256i w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3], w4 = wv[4], w5 = wv[5];
  for (int64_t o0 = (ow - 1) / 8 * 8; o0 >= 0; o0 -= 8) {
    const int8_t* r = plane + 2 * o0;
    __m256i p0 = pairs16(r), p1 = pairs16(r + 2);
    char* o = out + o0 * es;
    const int last = static_cast<int>(std::min<int64_t>(8, ow - o0));
    for (int64_t oy = 0; oy < oh; ++oy, o += ow * es) {
      const int8_t* r1 = r + (2 * oy + 1) * rs;
      const __m256i a0 = pairs16(r1), a1 = pairs16(r1 + 2);
      const __m256i b0 = pairs16(r1 + rs), b1 = pairs16(r1 + rs + 2);
      const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(p0, w0), _mm256_madd_epi16(p1, w1));
      const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(a0, w2), _mm256_madd_epi16(a1, w3));
      const __m256i s2 = _mm256_add_epi32(_mm256_madd_epi16(b0, w4), _mm256_madd_epi16(b1, w5));
      p0 = b0;
      p1 = b1;
      row_store8<K, kShift, kClamp>(e, _mm256_add_epi32(_mm256_add_epi32(s0, s1), s2), o, oy + 1 < oh ? 8 : last);
    }
  }
}

// Channels [c0, c0 + nc) of image img; scratch: two planes of hp padded rows (dw_rows_stride bytes each) whose
// padding (rows and columns) is zero.
template <OutKind K, bool kShift, bool kClamp>
void rows_s2(const DwNhwcArgs& d, int64_t img, int64_t c0, int64_t nc, int8_t* scratch, int32_t* sums) {
  constexpr int64_t es = K == OutKind::kInt8 ? 1 : (K == OutKind::kInt16 ? 2 : 4);
  const ConvAttrs& a = d.a;
  const int64_t rs = dw_rows_stride(d), npix = d.oh * d.ow;
  // Channel c + 1 is copied before channel c is computed: the loads of a plane, which straddle the copy's
  // stores, then never wait for those stores (a load overlapping two pending stores cannot be forwarded).
  int8_t* const planes[2] = {scratch, scratch + d.hp * rs};
  auto copy = [&](int64_t c) {
    const int8_t* src = d.x + (img * d.c + c) * d.h * d.w;
    int8_t* plane = planes[(c - c0) & 1] + a.pt * rs + a.pl;
    for (int64_t y = 0; y < d.h; ++y) copy_row(src + y * d.w, d.w, plane + y * rs);
  };
  const Epilogue& ep = *d.ep;
  const int shift = kShift ? d.shift : 0;
  const int32_t half = shift > 0 ? int32_t{1} << (shift - 1) : 0;
  RowEpilogue e{Consts8(ep), ep.fdiv != 0.0, _mm256_setzero_si256(),
                _mm256_set1_epi32(static_cast<int32_t>(kShift ? ep.lo : 0)),
                _mm256_set1_epi32(static_cast<int32_t>(kShift ? ep.hi : 0)), _mm_cvtsi32_si128(shift),
                _mm256_setzero_pd()};
  char* const out_img = static_cast<char*>(d.out) + img * d.c * npix * es;
  copy(c0);
  for (int64_t c = c0; c < c0 + nc; ++c) {
    if (c + 1 < c0 + nc) copy(c + 1);
    const int8_t* const plane = planes[(c - c0) & 1];
    // The weight pairs (w[i][2j], w[i][2j + 1]), the second 0 past the kernel's width, one 32-bit lane each.
    const int16_t* wb = d.wts->block(c / kDwBlock);
    const int64_t lane = c % kDwBlock;
    auto wt = [&](int64_t i, int64_t j) -> uint32_t {
      if (j >= a.kw) return 0;
      const int64_t t = i * a.kw + j;
      return static_cast<uint16_t>(wb[((t / 2) * kDwBlock + lane) * 2 + t % 2]);
    };
    __m256i wv[6];
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        wv[i * 2 + j] = _mm256_set1_epi32(static_cast<int32_t>(wt(i, 2 * j) | (wt(i, 2 * j + 1) << 16)));
    const int32_t bias = ep.bias ? ep.bias[c] : 0;
    e.bh = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(bias) + static_cast<uint32_t>(half)));
    e.bd = _mm256_set1_pd(static_cast<double>(bias));
    // With a sink: the channel's sums into `sums`, then to the sink.
    char* const out_c = d.sink != nullptr ? reinterpret_cast<char*>(sums) : out_img + c * npix * es;
    walk_k3s2<K, kShift, kClamp>(e, wv, plane, rs, d.oh, d.ow, out_c);
    if (d.sink != nullptr) (*d.sink)(img, c, 0, d.oh, sums);
  }
}

// ---- The stride-1 row kernel (dw_rows_s1 in dwnhwc.h) -------------------------------------------------------

// Input row s (w bytes, sign-extended) -> int16 elements [0, w) of r.
inline void widen_row(const int8_t* s, int64_t w, int16_t* r) {
  int64_t x = 0;
  for (; x + 16 <= w; x += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + x),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + x))));
  if (x < w && w >= 16) {  // the last 16 again, overlapping (same values)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + w - 16),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + w - 16))));
    return;
  }
  for (; x < w; ++x) r[x] = s[x];
}

// The 16 int16 sums of output columns [o0, o0 + 16) of the output row whose first tap row is r (plane rows `rs`
// elements apart, vertical dilation dh): KH, KW > 0 fixed, else kh, kw.
template <int KH, int KW>
inline __m256i sums16(const int16_t* r, int64_t rs, int64_t dh, int64_t kh, int64_t kw, const __m256i* wv) {
  const int64_t h = KH > 0 ? KH : kh, w = KW > 0 ? KW : kw;
  __m256i acc = _mm256_setzero_si256();
  for (int64_t i = 0; i < h; ++i) {
    const int16_t* ri = r + i * dh * rs;
    for (int64_t j = 0; j < w; ++j)
      acc = _mm256_add_epi16(
          acc, _mm256_mullo_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ri + j)), wv[i * w + j]));
  }
  return acc;
}

// Unit u's channels: per channel the band's padded input rows are widened into `plane` (zeroed first: the widening
// writes only the input's columns of the input's rows, so the padding stays zero), then each output row 16 columns
// at a time (the last 16 of a row at ow - 16, overlapping: same values), widened to int32 for the epilogue or the
// sink's buffer.
template <OutKind K, bool kShift, bool kClamp, int KH, int KW>
void rows_s1(const DwNhwcArgs& d, const DwUnit& u, int16_t* plane, int32_t* sums) {
  constexpr int64_t es = K == OutKind::kInt8 ? 1 : (K == OutKind::kInt16 ? 2 : 4);
  const ConvAttrs& a = d.a;
  const int64_t rs = dw_rows_s1_stride(d), rows = u.y1 - u.y0, in_rows = dw_band_in_rows(d, rows);
  const int64_t c0 = u.blk * kDwBlock, nc = std::min<int64_t>(kDwBlock, d.c - c0), taps = d.wts->taps;
  const int64_t npix = d.oh * d.ow;
  std::memset(plane, 0, static_cast<size_t>(in_rows * rs) * 2);
  const Epilogue& ep = *d.ep;
  const int shift = kShift ? d.shift : 0;
  const int32_t half = shift > 0 ? int32_t{1} << (shift - 1) : 0;
  RowEpilogue e{Consts8(ep), ep.fdiv != 0.0, _mm256_setzero_si256(),
                _mm256_set1_epi32(static_cast<int32_t>(kShift ? ep.lo : 0)),
                _mm256_set1_epi32(static_cast<int32_t>(kShift ? ep.hi : 0)), _mm_cvtsi32_si128(shift),
                _mm256_setzero_pd()};
  char* const out_img = static_cast<char*>(d.out) + u.img * d.c * npix * es;
  __m256i wv[64];
  for (int64_t c = c0; c < c0 + nc; ++c) {
    const int8_t* src = d.x + (u.img * d.c + c) * d.h * d.w;
    for (int64_t i = 0; i < in_rows; ++i) {
      const int64_t y = u.y0 + i - a.pt;  // stride 1: padded row y0 + i
      if (y >= 0 && y < d.h) widen_row(src + y * d.w, d.w, plane + i * rs + a.pl);
    }
    const int16_t* wb = d.wts->block(c / kDwBlock);
    const int64_t lane = c % kDwBlock;
    for (int64_t t = 0; t < taps; ++t) wv[t] = _mm256_set1_epi16(wb[((t / 2) * kDwBlock + lane) * 2 + t % 2]);
    const int32_t bias = ep.bias ? ep.bias[c] : 0;
    e.bh = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(bias) + static_cast<uint32_t>(half)));
    e.bd = _mm256_set1_pd(static_cast<double>(bias));
    int64_t oy = u.y0;
    if constexpr (KH > 0 && KW > 0) {
      if (d.sink != nullptr && a.dh == 1) {
        // R output rows per pass share their input rows: R + KH - 1 rows of KW loads each per 16 columns of R rows
        // (3 x 3, R = 4: 18 loads per 64 outputs instead of 36). The unaligned loads, each split across two cache
        // lines half the time, bounded the one-row loop (Zen 3: exm_tiny_unet's depthwise layers about 0.85x).
        constexpr int R = KH <= 3 ? 4 : 2;
        const int64_t ow = d.ow;
        for (; oy + R <= u.y1; oy += R) {
          const int16_t* r = plane + (oy - u.y0) * rs;
          int32_t* o = sums + (oy - u.y0) * ow;
          for (int64_t o0 = 0; o0 < ow; o0 += 16) {
            const int64_t at = std::min(o0, ow - 16);
            __m256i acc[R];
            for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_si256();
            for (int i = 0; i < R + KH - 1; ++i) {
              const int16_t* ri = r + i * rs + at;
              __m256i x[KW];
              for (int j = 0; j < KW; ++j) x[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ri + j));
              for (int k = 0; k < R; ++k) {
                const int t = i - k;  // the kernel row input row i is for output row k
                if (t < 0 || t >= KH) continue;
                __m256i rsum = _mm256_mullo_epi16(x[0], wv[KW * t]);
                for (int j = 1; j < KW; ++j) rsum = _mm256_add_epi16(rsum, _mm256_mullo_epi16(x[j], wv[KW * t + j]));
                acc[k] = _mm256_add_epi16(acc[k], rsum);
              }
            }
            for (int k = 0; k < R; ++k) {
              int32_t* ok = o + k * ow + at;
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(ok), _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc[k])));
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(ok + 8),
                                  _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc[k], 1)));
            }
          }
        }
      }
    }
    for (; oy < u.y1; ++oy) {
      const int16_t* r = plane + (oy - u.y0) * rs;
      for (int64_t o0 = 0; o0 < d.ow; o0 += 16) {
        const int64_t at = std::min(o0, d.ow - 16);
        const __m256i acc = sums16<KH, KW>(r + at, rs, a.dh, a.kh, a.kw, wv);
        const __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc));
        const __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc, 1));
        if (d.sink != nullptr) {
          int32_t* o = sums + (oy - u.y0) * d.ow + at;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), lo);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8), hi);
        } else {
          char* o = out_img + (c * npix + oy * d.ow + at) * es;
          row_store8<K, kShift, kClamp>(e, lo, o, 8);
          row_store8<K, kShift, kClamp>(e, hi, o + 8 * es, 8);
        }
      }
    }
    if (d.sink != nullptr) (*d.sink)(u.img, c, u.y0, u.y1, sums);
  }
}

template <OutKind K, bool kShift, bool kClamp>
void rows_s1_any(const DwNhwcArgs& d, const DwUnit& u, int16_t* plane, int32_t* sums) {
  if (d.a.kh == 3 && d.a.kw == 3) rows_s1<K, kShift, kClamp, 3, 3>(d, u, plane, sums);
  else if (d.a.kh == 5 && d.a.kw == 5) rows_s1<K, kShift, kClamp, 5, 5>(d, u, plane, sums);
  else rows_s1<K, kShift, kClamp, 0, 0>(d, u, plane, sums);
}

template <OutKind K>
void tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch) {
  int32_t* const sums = reinterpret_cast<int32_t*>(scratch + dw_nhwc_sums_offset(d));
  if (dw_rows_s2(d)) {
    // Two planes: only the bytes [pl, pl + w) of their input rows are written per channel, so their padding stays
    // zero for every channel.
    std::memset(scratch, 0, static_cast<size_t>(2 * d.hp * dw_rows_stride(d)));
    auto run = [&](auto fn) {
      for (int64_t t = t0; t < t1; ++t) {
        const DwUnit u = dw_nhwc_unit(d, t);  // whole images here (dw_nhwc_band)
        const int64_t c0 = u.blk * kDwBlock;
        fn(d, u.img, c0, std::min<int64_t>(kDwBlock, d.c - c0), scratch, sums);
      }
    };
    constexpr bool kInt = K == OutKind::kInt8 || K == OutKind::kInt16 || K == OutKind::kInt32;
    if (kInt && d.shift >= 0) {
      // [lo, hi] the whole output type: the saturating packs clamp (kInt32: nothing to clamp).
      const double tlo = K == OutKind::kInt8 ? -128.0 : (K == OutKind::kInt16 ? -32768.0 : -2147483648.0);
      const double thi = K == OutKind::kInt8 ? 127.0 : (K == OutKind::kInt16 ? 32767.0 : 2147483647.0);
      if (d.ep->lo <= tlo && d.ep->hi >= thi) run(rows_s2<K, kInt, false>);
      else run(rows_s2<K, kInt, true>);
    } else {
      run(rows_s2<K, false, false>);
    }
    return;
  }
  if (dw_rows_s1(d)) {
    auto run = [&](auto fn) {
      for (int64_t t = t0; t < t1; ++t) fn(d, dw_nhwc_unit(d, t), reinterpret_cast<int16_t*>(scratch), sums);
    };
    constexpr bool kInt = K == OutKind::kInt8 || K == OutKind::kInt16 || K == OutKind::kInt32;
    if (kInt && d.shift >= 0) run(rows_s1_any<K, kInt, true>);
    else run(rows_s1_any<K, false, false>);
    return;
  }
  auto* buf = reinterpret_cast<int16_t*>(scratch);
  char* tile = reinterpret_cast<char*>(scratch) + dw_nhwc_sums_offset(d) - kDwBlock * kDwBlock * 4;  // the tile sits right before the sums
  for (int64_t t = t0; t < t1; ++t) {
    const DwUnit u = dw_nhwc_unit(d, t);
    switch (d.wts->pairs) {
      case 2: block<K, 2>(d, u, buf, tile, sums); break;
      case 3: block<K, 3>(d, u, buf, tile, sums); break;
      case 5: block<K, 5>(d, u, buf, tile, sums); break;
      default: block<K, 0>(d, u, buf, tile, sums); break;
    }
  }
}

}  // namespace

void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch) {
  switch (d.ep->kind) {
    case OutKind::kInt8: tasks<OutKind::kInt8>(d, t0, t1, scratch); break;
    case OutKind::kInt16: tasks<OutKind::kInt16>(d, t0, t1, scratch); break;
    case OutKind::kInt32: tasks<OutKind::kInt32>(d, t0, t1, scratch); break;
    case OutKind::kFloat: tasks<OutKind::kFloat>(d, t0, t1, scratch); break;
    case OutKind::kRaw: tasks<OutKind::kRaw>(d, t0, t1, scratch); break;
  }
}

}  // namespace ortquant::conv::avx2
