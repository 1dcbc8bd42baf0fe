// AVX-512 VNNI body of the channels-last depthwise convolution (dwnhwc.h): the stride-1 row kernel (dw_rows_s1)
// for raw sums (OutKind::kRaw: integer mode's sink, or an int32 output), on vpdpbusd. Every other layer and output
// kind runs the AVX2 body (avx2::dw_nhwc_tasks).
//
// The row kernel's inputs are non-negative codes (Epilogue::x_max <= 127, dw_rows_s1_vnni), so they are vpdpbusd's
// unsigned bytes as they are. Per channel, each padded input row of the band becomes a quad row: for output column o and tap
// group g (taps 4g .. 4g + 3 of a kernel row, the missing ones weighted 0) the 32-bit lane o holds the padded
// input bytes o + 4g .. o + 4g + 3, built 8 columns at a time by one vpshufb of two overlapping 16-byte loads.
// Then 16 output columns of a row are kh * groups (load, vpdpbusd against the broadcast weight quad): exact int32
// sums, 3 vpdpbusd for a 3 x 3 kernel where the AVX2 body needs 9 vpmullw + 9 vpaddw per 16 columns. The sums are
// the AVX2 body's (which is exact under dw_rows_s1's int16 bound) bit for bit. A 3-row kernel of at most 4 columns
// without vertical dilation (the usual 3 x 3) keeps its quads in registers instead (rows_s1_3x4): per 16 columns,
// 8 output rows read 10 input rows' quads built once each, with no quad row stored (Zen 4: 0.83x the layer's time).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/simd.h"

#include <algorithm>
#include <cstring>

#include "core/conv/dwnhwc.h"

namespace ortquant::conv::avx512vnni {
namespace {

using gemm::OutKind;

// The 32 bytes of an input row (w bytes at src) from column s0 on, 0 outside [0, w): masked at the row's edges.
inline __m256i row32(const int8_t* src, int64_t w, int64_t s0) {
  if (s0 >= 0 && s0 + 32 <= w) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + s0));
  const int64_t lo = std::max<int64_t>(0, -s0), hi = std::min<int64_t>(32, w - s0);
  if (hi <= lo) return _mm256_setzero_si256();
  const uint64_t bits = ((uint64_t{1} << hi) - 1) & ~((uint64_t{1} << lo) - 1);
  return _mm256_maskz_loadu_epi8(static_cast<__mmask32>(bits), src + s0);  // only the row's bytes are read
}

// The quad row q (qs lanes, a multiple of 16) of tap group g for the input row src (w bytes, pl columns of left
// padding): lane o holds the padded row's bytes o + 4g .. o + 4g + 3. Per 16 lanes: one load of the 28 bytes they
// span, vpermd placing dwords j .. j + 3 in 128-bit lane j, vpshufb picking the 4 overlapping quads of each.
inline void quad_row(const int8_t* src, int64_t w, int64_t pl, int64_t g, int64_t qs, int32_t* q) {
  const __m512i dwords = _mm512_setr_epi32(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6);
  const __m512i quads = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6));
  const int64_t s = 4 * g - pl;  // input column of padded column o + 4g is o + s
  for (int64_t o = 0; o < qs; o += 16) {
    const __m512i v = _mm512_permutexvar_epi32(dwords, _mm512_castsi256_si512(row32(src, w, o + s)));
    _mm512_storeu_si512(q + o, _mm512_shuffle_epi8(v, quads));
  }
}

// The sums of output columns [o, o + 16 * NV) of one row: r the quad rows of its first kernel row (kernel rows
// `step` int32 apart, tap groups qs apart); KH, G > 0 fixed, else kh, groups.
template <int KH, int G, int NV>
inline void cols(const int32_t* r, int64_t step, int64_t qs, int64_t kh, int64_t groups, const __m512i* wq,
                 int64_t o, int32_t* out) {
  const int64_t h = KH > 0 ? KH : kh, ng = G > 0 ? G : groups;
  __m512i acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_si512();
  for (int64_t i = 0; i < h; ++i) {
    for (int64_t g = 0; g < ng; ++g) {
      const int32_t* q = r + i * step + g * qs + o;
      const __m512i w = wq[i * ng + g];
      for (int v = 0; v < NV; ++v) acc[v] = _mm512_dpbusd_epi32(acc[v], _mm512_loadu_si512(q + 16 * v), w);
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_storeu_si512(out + o + 16 * v, acc[v]);
}

// One output row of ow >= 16 columns: 64 at a time (four independent vpdpbusd chains hide its latency), then 16
// at a time, the last 16 at ow - 16 (overlapping: the same sums).
template <int KH, int G>
void row(const int32_t* r, int64_t step, int64_t qs, int64_t kh, int64_t groups, const __m512i* wq, int64_t ow,
         int32_t* out) {
  int64_t o = 0;
  for (; o + 64 <= ow; o += 64) cols<KH, G, 4>(r, step, qs, kh, groups, wq, o, out);
  for (; o < ow; o += 16) cols<KH, G, 1>(r, step, qs, kh, groups, wq, std::min(o, ow - 16), out);
}

// Channel c's weights as broadcast quads, wq[i * groups + g] = taps 4g .. 4g + 3 of kernel row i (the taps past
// kw weighted 0), for both row kernels.
inline void weight_quads(const DwNhwcArgs& d, int64_t c, int64_t groups, __m512i* wq) {
  const int16_t* wb = d.wts->block(c / kDwBlock);
  const int64_t lane = c % kDwBlock;
  for (int64_t i = 0; i < d.a.kh; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      uint32_t packed = 0;
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t j = 4 * g + k, t = i * d.a.kw + j;
        const int16_t v = j < d.a.kw ? wb[((t / 2) * kDwBlock + lane) * 2 + t % 2] : 0;
        packed |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(v))) << (8 * k);
      }
      wq[i * groups + g] = _mm512_set1_epi32(static_cast<int32_t>(packed));
    }
  }
}

// The quad row of 16 output columns from column s0 - pl on (tap group 0) in a register: quad_row's vector.
inline __m512i quad16(const int8_t* src, int64_t w, int64_t s0, __m512i dwords, __m512i quads) {
  return _mm512_shuffle_epi8(_mm512_permutexvar_epi32(dwords, _mm512_castsi256_si512(row32(src, w, s0))), quads);
}

// R output rows of a 3-row kernel of at most 4 columns (one tap group) with dilation 1, every 16-column strip: per
// strip the R + 2 input rows' quads are built in registers once (rows[i] null: a padding row, code 0) and each used
// by up to three output rows, so no quad row goes through memory. Sums to out (rows `ostride` int32 apart); the last
// strip at ow - 16 overlaps the one before (the same sums).
template <int R>
void rows3(const int8_t* const* rows, int64_t w, int64_t pl, int64_t ow, const __m512i* wq, int32_t* out,
           int64_t ostride) {
  const __m512i dwords = _mm512_setr_epi32(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6);
  const __m512i quads = _mm512_setr_epi32(0x03020100, 0x04030201, 0x05040302, 0x06050403, 0x03020100, 0x04030201,
                                          0x05040302, 0x06050403, 0x03020100, 0x04030201, 0x05040302, 0x06050403,
                                          0x03020100, 0x04030201, 0x05040302, 0x06050403);  // bytes o .. o + 3, o < 4
  for (int64_t o = 0; o < ow; o += 16) {
    const int64_t oc = std::min(o, ow - 16), s0 = oc - pl;
    __m512i q[R + 2];
    for (int i = 0; i < R + 2; ++i)
      q[i] = rows[i] != nullptr ? quad16(rows[i], w, s0, dwords, quads) : _mm512_setzero_si512();
    for (int r = 0; r < R; ++r) {
      __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[r], wq[0]);
      acc = _mm512_dpbusd_epi32(acc, q[r + 1], wq[1]);
      acc = _mm512_dpbusd_epi32(acc, q[r + 2], wq[2]);
      _mm512_storeu_si512(out + r * ostride + oc, acc);
    }
  }
}

// Unit u's channels for a 3 x kw kernel (kw <= 4), dilation 1: the band's rows in blocks of up to 8 (rows3). Same
// sums as rows_s1<3, 1>.
void rows_s1_3x4(const DwNhwcArgs& d, const DwUnit& u, int32_t* sums) {
  const ConvAttrs& a = d.a;
  const int64_t c0 = u.blk * kDwBlock, nc = std::min<int64_t>(kDwBlock, d.c - c0);
  const int64_t npix = d.oh * d.ow;
  int32_t* const out_img = static_cast<int32_t*>(d.out) + u.img * d.c * npix;
  for (int64_t c = c0; c < c0 + nc; ++c) {
    const int8_t* src = d.x + (u.img * d.c + c) * d.h * d.w;
    __m512i wq[3];
    weight_quads(d, c, 1, wq);
    int32_t* const base = d.sink != nullptr ? sums - u.y0 * d.ow : out_img + c * npix;  // + oy * ow: row oy
    for (int64_t oy = u.y0; oy < u.y1; oy += 8) {
      const int64_t nr = std::min<int64_t>(8, u.y1 - oy);
      const int8_t* rows[10];
      for (int64_t i = 0; i < nr + 2; ++i) {
        const int64_t y = oy + i - a.pt;
        rows[i] = y >= 0 && y < d.h ? src + y * d.w : nullptr;
      }
      int32_t* const out = base + oy * d.ow;
      switch (nr) {
        case 8: rows3<8>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 7: rows3<7>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 6: rows3<6>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 5: rows3<5>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 4: rows3<4>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 3: rows3<3>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        case 2: rows3<2>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
        default: rows3<1>(rows, d.w, a.pl, d.ow, wq, out, d.ow); break;
      }
    }
    if (d.sink != nullptr) (*d.sink)(u.img, c, u.y0, u.y1, sums);
  }
}

// Unit u's channels (see the file comment). Scratch: the quad rows of the band (in_rows x groups x qs int32);
// `sums` as the AVX2 body's.
template <int KH, int G>
void rows_s1(const DwNhwcArgs& d, const DwUnit& u, int8_t* scratch, int32_t* sums) {
  const ConvAttrs& a = d.a;
  const int64_t rows = u.y1 - u.y0, in_rows = dw_band_in_rows(d, rows);
  const int64_t groups = dw_rows_s1_groups(d), qs = dw_rows_s1_quads(d);
  const int64_t c0 = u.blk * kDwBlock, nc = std::min<int64_t>(kDwBlock, d.c - c0);
  const int64_t npix = d.oh * d.ow;
  int32_t* const quads = reinterpret_cast<int32_t*>(scratch);
  int32_t* const out_img = static_cast<int32_t*>(d.out) + u.img * d.c * npix;
  __m512i wq[128];
  for (int64_t c = c0; c < c0 + nc; ++c) {
    const int8_t* src = d.x + (u.img * d.c + c) * d.h * d.w;
    for (int64_t i = 0; i < in_rows; ++i) {
      const int64_t y = u.y0 + i - a.pt;  // stride 1: padded row y0 + i
      int32_t* q = quads + i * groups * qs;
      if (y < 0 || y >= d.h) std::memset(q, 0, static_cast<size_t>(groups * qs * 4));
      else
        for (int64_t g = 0; g < groups; ++g) quad_row(src + y * d.w, d.w, a.pl, g, qs, q + g * qs);
    }
    weight_quads(d, c, groups, wq);
    for (int64_t oy = u.y0; oy < u.y1; ++oy) {
      const int32_t* r = quads + (oy - u.y0) * groups * qs;
      int32_t* const o_row = d.sink != nullptr ? sums + (oy - u.y0) * d.ow : out_img + c * npix + oy * d.ow;
      row<KH, G>(r, a.dh * groups * qs, qs, a.kh, groups, wq, d.ow, o_row);
    }
    if (d.sink != nullptr) (*d.sink)(u.img, c, u.y0, u.y1, sums);
  }
}

}  // namespace

void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch) {
  if (d.ep->kind != OutKind::kRaw || !dw_rows_s1_vnni(d)) {
    avx2::dw_nhwc_tasks(d, t0, t1, scratch);
    return;
  }
  int32_t* const sums = reinterpret_cast<int32_t*>(scratch + dw_nhwc_sums_offset(d));
  auto run = [&](auto fn) {
    for (int64_t t = t0; t < t1; ++t) fn(d, dw_nhwc_unit(d, t), scratch, sums);
  };
  if (d.a.kh == 3 && d.a.kw <= 4 && d.a.dh == 1)
    for (int64_t t = t0; t < t1; ++t) rows_s1_3x4(d, dw_nhwc_unit(d, t), sums);
  else if (d.a.kh == 3 && d.a.kw <= 4) run(rows_s1<3, 1>);
  else if (d.a.kh == 5 && d.a.kw <= 8 && d.a.kw > 4) run(rows_s1<5, 2>);
  else run(rows_s1<0, 0>);
}

}  // namespace ortquant::conv::avx512vnni
