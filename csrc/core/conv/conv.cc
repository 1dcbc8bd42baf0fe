#include "core/conv/conv.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif


#include "core/conv/depthwise_kernels.h"
#include "core/gemm/cols_runs.h"
#include "core/conv/dwnhwc.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/scratch.h"

namespace ortquant::conv {

using gemm::Epilogue;
using gemm::Kernel;
using gemm::PackedWeights;
using gemm::Parallel;

void validate_attrs(const ConvAttrs& a, bool transposed) {
  // Limits (docs/ops.md): strides in [1, 64] in both dimensions (the phase-plane engine keeps per-phase tables of
  // 64 entries and allocates stride_h * stride_w planes), kernel, dilations and pads at most kMaxGeometry. With
  // them every size below fits int64 with room to spare, and the byte limit bounds every buffer.
  check_range("kernel_shape", a.kh, 1, kMaxGeometry, "height");
  check_range("kernel_shape", a.kw, 1, kMaxGeometry, "width");
  check_range("strides", a.sh, 1, kMaxConvStride, "height");
  check_range("strides", a.sw, 1, kMaxConvStride, "width");
  check_range("dilations", a.dh, 1, kMaxGeometry, "height");
  check_range("dilations", a.dw, 1, kMaxGeometry, "width");
  check_range("pads", a.pt, 0, kMaxGeometry, "top");
  check_range("pads", a.pl, 0, kMaxGeometry, "left");
  check_range("pads", a.pb, 0, kMaxGeometry, "bottom");
  check_range("pads", a.pr, 0, kMaxGeometry, "right");
  check_range("group", a.group, 1, INT32_MAX);
  if (transposed) {
    if (a.oph < 0 || a.opw < 0 || a.oph >= std::max(a.sh, a.dh) || a.opw >= std::max(a.sw, a.dw))
      throw_error("output_padding [", a.oph, ", ", a.opw, "] must be non-negative and smaller than max(stride, dilation)");
  } else if (a.oph != 0 || a.opw != 0) {
    throw_error("output_padding is only defined for transposed convolutions");
  }
}

int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char* what) {
  if (in < 0) throw_error("input ", what, " ", in, " is negative");
  if (s < 1 || d < 1 || k < 1) throw_error("kernel, stride and dilation must be positive");
  const int64_t span = checked_add(checked_mul(d, k - 1, "dilated kernel"), 1, "dilated kernel");
  const int64_t padded = checked_add(checked_add(in, p0, "padded input"), p1, "padded input");
  if (padded < span)
    throw_error("input ", what, " ", in, " (padded ", padded, ") is smaller than the dilated kernel ", span);
  return (padded - span) / s + 1;
}

int64_t conv_transpose_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t op,
                               const char* what) {
  if (in < 1) throw_error("input ", what, " ", in, " must be positive");
  const char* c = "transposed convolution output size";
  int64_t out = checked_mul(in - 1, s, c);
  out = checked_add(out, checked_mul(d, k - 1, c), c);
  out = checked_sub(checked_sub(checked_add(out, 1 + op, c), p0, c), p1, c);
  if (out < 1) throw_error("output ", what, " would be ", out, " (input ", in, ", pads ", p0, "+", p1, ")");
  return out;
}

namespace {

void check_input(const Shape& x, int64_t channels, const char* what_channels) {
  if (x.size() != 4) throw_error("input X must be 4-D [N, C, H, W], got shape ", shape_str(x));
  if (x[1] != channels)
    throw_error("input X has ", x[1], " channels but the weights expect ", channels, " (", what_channels, ")");
}

// Task count for n items of `work` MACs each.
size_t tasks_for(int64_t n, int64_t work_each) {
  const int64_t total = n * std::max<int64_t>(work_each, 1);
  return static_cast<size_t>(std::clamp<int64_t>(total / (int64_t{1} << 20), 1, std::min<int64_t>(n, 64)));
}

}  // namespace

void depthwise(const DepthwiseArgs& d, int64_t p0, int64_t p1, int8_t* phases, int32_t* acc, Kernel kernel) {
  switch (gemm::resolve_kernel(kernel)) {
    case Kernel::kAvx512Vnni: avx512::depthwise_planes(d, p0, p1, phases, acc); break;
    case Kernel::kAvxVnni:
    case Kernel::kAvx2: avx2::depthwise_planes(d, p0, p1, phases, acc); break;
    default: scalar::depthwise_planes(d, p0, p1, phases, acc); break;
  }
}

// ---- phase planes ----------------------------------------------------------------------------------------

PhaseGrid phase_grid(int64_t h, int64_t w, const ConvAttrs& a, int64_t oh, int64_t ow) {
  PhaseGrid g;
  g.sh = a.sh;
  g.sw = a.sw;
  g.rows = (h + a.pt + a.pb + a.sh - 1) / a.sh;
  g.cols = (w + a.pl + a.pr + a.sw - 1) / a.sw;
  g.oh = oh;
  g.ow = ow;
  // A tap run of the last grid row may pass the plane's end by up to (kw-1)*dw/sw bytes (discarded columns).
  g.plane = g.rows * g.cols + (a.kw - 1) * a.dw / a.sw + 1;
  return g;
}

namespace {

// dst[t] = src[2t] for t < n, reading nothing at or beyond `limit`.
void even_bytes(const int8_t* src, int64_t n, const int8_t* limit, int8_t* dst) {
#if defined(__SSE2__)
  if (n >= 16 && src + 2 * n <= limit) {
    const __m128i lo = _mm_set1_epi16(0x00FF);
    auto step = [&](int64_t t) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * t));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * t + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + t), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
    };
    for (int64_t t = 0; t + 16 <= n; t += 16) step(t);
    if (n % 16) step(n - 16);  // the last 16, overlapping
    return;
  }
#endif
  for (int64_t t = 0; t < n; ++t) dst[t] = src[2 * t];
}

// Bytes of readable slack before and after the phase buffer for pack_panel_grid's 16-byte chunks.
constexpr int64_t kPhaseSlack = 16;
// The largest quad planes of one image and group for which Conv2d takes the channel-quad path (conv.h, quad_).
constexpr int64_t kQuadMaxBytes = 256 << 10;
// The int32 sums of one band of Conv2d::run_raw_bands (kept in L2 for the sink's rescale).
constexpr int64_t kBandSumBytes = 128 << 10;

// pack_panel for the output pixels [p0, p0 + n) of an oh x ow output whose im2col row kk reads the phase plane run
// rows[kk] with `cols` (> ow) bytes per output row: output pixel (y, x) is at rows[kk][y * cols + x]. So the grid's
// extra columns are neither packed nor computed, and the GEMM writes the NCHW output directly (no copy). A panel is
// a few segments, each one output row's run, contiguous in every row; each is moved in chunks of 16 pixels, the
// last chunk of a segment ending at the segment's end (overlapping the chunk before it) or, for a segment shorter
// than 16, running on into the next segment's lanes, which that segment overwrites. A short last segment that
// would run past lane kPanel takes the panel's last 16 lanes instead, starting before the segment (its lanes
// before the segment belong to the previous segment), so it is written first. Reads up to 15 bytes before and after
// a run (kPhaseSlack). Needs ow >= 16: then at most one segment starts in the last 16 lanes. Returns the OR of
// every byte it read (a superset of the panel's values: its bit 7 is clear only when they are all non-negative, and
// then it bounds them).
uint8_t pack_panel_grid(const int8_t* const* rows, int64_t k, int64_t p0, int64_t n, int64_t ow, int64_t cols,
                        uint8_t* dst) {
  struct Seg {
    int64_t lane, off;   // first lane; its plane offset minus the first lane (a chunk at lane l reads off + l)
    int64_t start, end;  // chunk lanes written: [start, end) in steps of 16, the last one at end - 16
  };
  Seg segs[gemm::kPanel / 16 + 2];
  int nseg = 0;
  for (int64_t l = 0; l < n;) {
    const int64_t p = p0 + l, y = p / ow, x = p % ow;
    const int64_t len = std::min(n - l, ow - x);
    Seg s{l, y * cols + x - l, l, l + len};
    if (len < 16) {
      s.start = std::min<int64_t>(l, gemm::kPanel - 16);
      s.end = s.start + 16;
    }
    segs[nseg++] = s;
    l += len;
  }
  // The chunks in writing order: the segment whose chunk starts before its first lane (at most the last one)
  // first, then the others in lane order.
  int64_t lane[2 * (gemm::kPanel / 16) + 4], at[2 * (gemm::kPanel / 16) + 4];
  int nc = 0;
  const bool early = nseg > 0 && segs[nseg - 1].start < segs[nseg - 1].lane;
  for (int oi = 0; oi < nseg; ++oi) {
    const Seg& s = segs[early ? (oi + nseg - 1) % nseg : oi];
    for (int64_t c = s.start;; c += 16) {
      if (c + 16 > s.end) c = s.end - 16;
      lane[nc] = c;
      at[nc++] = s.off + c;
      if (c + 16 >= s.end) break;
    }
  }
  static const int8_t kZeros[16] = {};
  const int64_t kg = gemm::kgroups_of(k), full = k / 4;
#if defined(__SSE2__)
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  __m128i any = _mm_setzero_si128();
  // One k-group's chunk: 16 pixels of 4 rows (s[i] already at the chunk) -> 64 bytes at d.
  auto chunk = [&](const int8_t* s0, const int8_t* s1, const int8_t* s2, const int8_t* s3, uint8_t* d) {
    const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0));
    const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1));
    const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2));
    const __m128i a3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3));
    any = _mm_or_si128(any, _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3)));
    const __m128i v0 = _mm_xor_si128(a0, flip), v1 = _mm_xor_si128(a1, flip);
    const __m128i v2 = _mm_xor_si128(a2, flip), v3 = _mm_xor_si128(a3, flip);
    const __m128i ab_lo = _mm_unpacklo_epi8(v0, v1), ab_hi = _mm_unpackhi_epi8(v0, v1);
    const __m128i cd_lo = _mm_unpacklo_epi8(v2, v3), cd_hi = _mm_unpackhi_epi8(v2, v3);
    __m128i* out = reinterpret_cast<__m128i*>(d);
    _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
    _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
  };
#else
  uint8_t any = 0;
  auto chunk = [&](const int8_t* s0, const int8_t* s1, const int8_t* s2, const int8_t* s3, uint8_t* d) {
    const int8_t* src[4] = {s0, s1, s2, s3};
    for (int q = 0; q < 16; ++q)
      for (int i = 0; i < 4; ++i) {
        const auto v = static_cast<uint8_t>(src[i][q]);
        any = static_cast<uint8_t>(any | v);
        d[q * 4 + i] = v ^ 0x80u;
      }
  };
#endif
  for (int64_t gi = 0; gi < full; ++gi) {
    const int8_t *r0 = rows[4 * gi], *r1 = rows[4 * gi + 1], *r2 = rows[4 * gi + 2], *r3 = rows[4 * gi + 3];
    uint8_t* d = dst + gi * gemm::kPanel * 4;
    for (int ci = 0; ci < nc; ++ci) chunk(r0 + at[ci], r1 + at[ci], r2 + at[ci], r3 + at[ci], d + lane[ci] * 4);
  }
  if (full < kg) {  // the last k-group's missing rows are zeros
    const int8_t* r[4];
    for (int i = 0; i < 4; ++i) r[i] = 4 * full + i < k ? rows[4 * full + i] : nullptr;
    uint8_t* d = dst + full * gemm::kPanel * 4;
    for (int ci = 0; ci < nc; ++ci) {
      const int8_t* src[4];
      for (int i = 0; i < 4; ++i) src[i] = r[i] ? r[i] + at[ci] : kZeros;
      chunk(src[0], src[1], src[2], src[3], d + lane[ci] * 4);
    }
  }
  if (n < gemm::kPanel)
    for (int64_t gi = 0; gi < kg; ++gi)
      std::memset(dst + (gi * gemm::kPanel + n) * 4, 0x80, static_cast<size_t>((gemm::kPanel - n) * 4));
#if defined(__SSE2__)
  any = _mm_or_si128(any, _mm_srli_si128(any, 8));
  any = _mm_or_si128(any, _mm_srli_si128(any, 4));
  any = _mm_or_si128(any, _mm_srli_si128(any, 2));
  any = _mm_or_si128(any, _mm_srli_si128(any, 1));
  return static_cast<uint8_t>(_mm_cvtsi128_si32(any));
#else
  return any;
#endif
}

// Epilogue::x_max from the OR of some int8 values (proven_x_max's rule): -1 when one is negative, else 2^b - 1 for
// the OR's bit length b.
int32_t x_max_of_or(uint8_t any) {
  if (any & 0x80u) return -1;
  int32_t bound = 0;
  while (bound < any) bound = 2 * bound + 1;
  return bound;
}

// One channel quad interleaved: d[4 * t + i] = s0[i * cstride + t] ^ 0x80 for t < len, i < 4 (the 4 channels side by
// side per position, sign-flipped as the engine's panels hold them). Returns the OR of every source byte.
uint8_t interleave_quad(const int8_t* s0, int64_t cstride, int64_t len, uint8_t* d) {
  uint8_t any = 0;
  const int8_t *s1 = s0 + cstride, *s2 = s1 + cstride, *s3 = s2 + cstride;
  int64_t t = 0;
#if defined(__SSE2__)
  if (len >= 16) {
    const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
    __m128i vany = _mm_setzero_si128();
    for (; t + 16 <= len; t += 16) {
      const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + t));
      const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + t));
      const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2 + t));
      const __m128i a3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3 + t));
      vany = _mm_or_si128(vany, _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3)));
      const __m128i v0 = _mm_xor_si128(a0, flip), v1 = _mm_xor_si128(a1, flip);
      const __m128i v2 = _mm_xor_si128(a2, flip), v3 = _mm_xor_si128(a3, flip);
      const __m128i ab_lo = _mm_unpacklo_epi8(v0, v1), ab_hi = _mm_unpackhi_epi8(v0, v1);
      const __m128i cd_lo = _mm_unpacklo_epi8(v2, v3), cd_hi = _mm_unpackhi_epi8(v2, v3);
      __m128i* out = reinterpret_cast<__m128i*>(d + 4 * t);
      _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
      _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
      _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
      _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
    }
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 8));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 4));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 2));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 1));
    any = static_cast<uint8_t>(_mm_cvtsi128_si32(vany));
  }
  if (t + 8 <= len) {  // short rows (8 to 15 pixels left): one 8-pixel step
    const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
    const __m128i a0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s0 + t));
    const __m128i a1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s1 + t));
    const __m128i a2 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s2 + t));
    const __m128i a3 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s3 + t));
    __m128i vany = _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3));
    const __m128i ab = _mm_unpacklo_epi8(_mm_xor_si128(a0, flip), _mm_xor_si128(a1, flip));
    const __m128i cd = _mm_unpacklo_epi8(_mm_xor_si128(a2, flip), _mm_xor_si128(a3, flip));
    __m128i* out = reinterpret_cast<__m128i*>(d + 4 * t);
    _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(ab, cd));
    _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(ab, cd));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 4));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 2));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 1));
    any = static_cast<uint8_t>(any | static_cast<uint8_t>(_mm_cvtsi128_si32(vany)));
    t += 8;
  }
#endif
  for (; t < len; ++t) {
    const int8_t v[4] = {s0[t], s1[t], s2[t], s3[t]};
    for (int i = 0; i < 4; ++i) {
      any = static_cast<uint8_t>(any | static_cast<uint8_t>(v[i]));
      d[4 * t + i] = static_cast<uint8_t>(static_cast<uint8_t>(v[i]) ^ 0x80u);
    }
  }
  return any;
}

// interleave_quad of every other byte: d[4 * t + i] = s0[i * cstride + 2 * t] ^ 0x80 for t < len, i < 4, reading
// nothing at or beyond `limit` (the end of channel 3's codes). Returns the OR of the bytes placed.
uint8_t interleave_quad_even(const int8_t* s0, int64_t cstride, int64_t len, const int8_t* limit, uint8_t* d) {
  uint8_t any = 0;
  const int8_t *s1 = s0 + cstride, *s2 = s1 + cstride, *s3 = s2 + cstride;
  int64_t t = 0;
#if defined(__SSE2__)
  if (len >= 16 && s3 + 2 * len <= limit) {  // a chunk at t reads bytes 2t .. 2t + 31 of each channel
    const __m128i lo = _mm_set1_epi16(0x00FF), flip = _mm_set1_epi8(static_cast<char>(0x80));
    __m128i vany = _mm_setzero_si128();
    auto even = [&](const int8_t* p) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
      return _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo));
    };
    auto step = [&](int64_t u) {
      const __m128i a0 = even(s0 + 2 * u), a1 = even(s1 + 2 * u), a2 = even(s2 + 2 * u), a3 = even(s3 + 2 * u);
      vany = _mm_or_si128(vany, _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3)));
      const __m128i v0 = _mm_xor_si128(a0, flip), v1 = _mm_xor_si128(a1, flip);
      const __m128i v2 = _mm_xor_si128(a2, flip), v3 = _mm_xor_si128(a3, flip);
      const __m128i ab_lo = _mm_unpacklo_epi8(v0, v1), ab_hi = _mm_unpackhi_epi8(v0, v1);
      const __m128i cd_lo = _mm_unpacklo_epi8(v2, v3), cd_hi = _mm_unpackhi_epi8(v2, v3);
      __m128i* out = reinterpret_cast<__m128i*>(d + 4 * u);
      _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
      _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
      _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
      _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
    };
    for (; t + 16 <= len; t += 16) step(t);
    if (t < len) step(len - 16), t = len;  // the last 16, overlapping (the same bytes again)
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 8));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 4));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 2));
    vany = _mm_or_si128(vany, _mm_srli_si128(vany, 1));
    any = static_cast<uint8_t>(_mm_cvtsi128_si32(vany));
  }
#endif
  (void)limit;
  for (; t < len; ++t) {
    const int8_t v[4] = {s0[2 * t], s1[2 * t], s2[2 * t], s3[2 * t]};
    for (int i = 0; i < 4; ++i) {
      any = static_cast<uint8_t>(any | static_cast<uint8_t>(v[i]));
      d[4 * t + i] = static_cast<uint8_t>(static_cast<uint8_t>(v[i]) ^ 0x80u);
    }
  }
  return any;
}

// The channel-quad planes of `quads` quads straight from the codes, unit strides (one phase plane of g.rows x g.cols
// positions, then slack): quad q's codes are `quad(q)`, 4 channels [h][w] `cstride` apart; the padding positions and
// the slack get 0x80 (the code 0, sign-flipped), as build_phases and an interleave of its planes would write them.
// Returns the OR of the codes (the padding's 0 adds nothing).
template <class QuadFn>
uint8_t build_quads_unit(const QuadFn& quad, int64_t cstride, int64_t quads, int64_t h, int64_t w, const ConvAttrs& a,
                         const PhaseGrid& g, uint8_t* dst) {
  const int64_t cols = g.cols, rows = g.rows, plane = g.plane;
  const int64_t f = std::clamp<int64_t>(a.pl, 0, cols), e = std::max(f, std::min(cols, w + a.pl));
  const int64_t top = std::min<int64_t>(a.pt, rows), last_row = std::max(top, std::min<int64_t>(rows, a.pt + h));
  uint8_t any = 0;
  for (int64_t q = 0; q < quads; ++q) {
    uint8_t* qd = dst + 4 * q * plane;
    const int8_t* src = quad(q);
    std::memset(qd, 0x80, static_cast<size_t>(4 * top * cols));
    for (int64_t yy = top; yy < last_row; ++yy) {
      uint8_t* r = qd + 4 * yy * cols;
      std::memset(r, 0x80, static_cast<size_t>(4 * f));
      if (e > f)
        any = static_cast<uint8_t>(any | interleave_quad(src + (yy - a.pt) * w + f - a.pl, cstride, e - f, r + 4 * f));
      std::memset(r + 4 * e, 0x80, static_cast<size_t>(4 * (cols - e)));
    }
    std::memset(qd + 4 * last_row * cols, 0x80, static_cast<size_t>(4 * (plane - last_row * cols)));
  }
  return any;
}

// The channel-quad planes of a 1-D layer (one input row, one kernel row, unit strides) in bands of `band` output
// positions, for the quads [q0, q1) of `quads`: band b of quad q holds the padded row's positions [b * band,
// b * band + bplane) (input position b * band - pl + j at j) at dst + 4 * (b * quads + q) * bplane, 0x80 (the code 0,
// sign-flipped) in the padding and beyond the row. So one band's planes of every quad lie together (quads * bplane
// positions) and the kernel reads them as a grid of `bands` rows of `band` outputs with a row stride of quads * bplane
// positions. quad(q - q0) is quad q's codes, 4 channels of w positions `cstride` apart. Returns the OR of the codes.
// Measured on Zen 3 (256 channels at L = 1000, k5): the whole-row planes (4 KiB apart, 64 of them read in every
// k-group loop) made the kernel 10-15 % slower than planes of 40 positions per band.
template <class QuadFn>
uint8_t build_quads_bands(const QuadFn& quad, int64_t cstride, int64_t q0, int64_t q1, int64_t quads, int64_t w,
                          int64_t pl, int64_t band, int64_t bands, int64_t bplane, uint8_t* dst) {
  // Each quad's padded row is interleaved once into a buffer that stays in L1, then every band's piece of it (with
  // its halo) is copied into place (interleaving the bands' short pieces one by one: 2.0 % of the Conv1d k5
  // 256->256 L1000 layer's time in perf samples, this 1.6 %).
  const int64_t len = (bands - 1) * band + bplane;
  thread_local std::vector<uint8_t> t_row;
  if (t_row.size() < static_cast<size_t>(4 * len)) t_row.resize(static_cast<size_t>(4 * len));
  uint8_t* const row = t_row.data();
  const int64_t f = std::clamp<int64_t>(pl, 0, len), e = std::clamp<int64_t>(pl + w, f, len);
  std::memset(row, 0x80, static_cast<size_t>(4 * f));
  std::memset(row + 4 * e, 0x80, static_cast<size_t>(4 * (len - e)));
  uint8_t any = 0;
  for (int64_t q = q0; q < q1; ++q) {
    if (e > f) any = static_cast<uint8_t>(any | interleave_quad(quad(q - q0) + f - pl, cstride, e - f, row + 4 * f));
    for (int64_t b = 0; b < bands; ++b)
      std::memcpy(dst + 4 * (b * quads + q) * bplane, row + 4 * b * band, static_cast<size_t>(4 * bplane));
  }
  return any;
}

// The band width of build_quads_bands for a 1-D layer with `quads` channel quads and ow outputs, or 0 (whole-row
// planes): a multiple of 8 (the kernel's 8-output chunks) that divides ow, from 24 to 64, for layers of at least 32
// quads (with 16 quads the whole-row planes ran as fast) and rows longer than 64.
int64_t quad_band_1d(int64_t quads, int64_t ow) {
  if (quads < 32 || ow <= 64 || ow % 8 != 0) return 0;
  for (const int64_t b : {32, 40, 24, 48, 56, 64})
    if (ow % b == 0) return b;
  return 0;
}

// Rows [r0, r1) of the unit-stride channel-quad planes of `quads` quads (build_quads_unit's layout and values),
// each quad's rows written as one band plane of `bplane` bytes per quad position ... : quad q's rows go to
// dst + 4 * q * bplane, padded row r0 + i at dst + 4 * (q * bplane + i * cols); the bytes after the band's rows (up
// to bplane) get 0x80. Quad q's codes are 4 channels [h][w] at x + 4 * q * h * w, h * w apart. Returns the OR of the
// codes read.
uint8_t build_quads_rows(const int8_t* x, int64_t quads, int64_t h, int64_t w, const ConvAttrs& a, int64_t cols,
                         int64_t r0, int64_t r1, int64_t bplane, uint8_t* dst) {
  const int64_t f = std::clamp<int64_t>(a.pl, 0, cols), e = std::max(f, std::min(cols, w + a.pl));
  uint8_t any = 0;
  for (int64_t q = 0; q < quads; ++q) {
    uint8_t* qd = dst + 4 * q * bplane;
    const int8_t* src = x + 4 * q * h * w;
    for (int64_t yy = r0; yy < r1; ++yy) {
      uint8_t* r = qd + 4 * (yy - r0) * cols;
      const int64_t iy = yy - a.pt;
      if (iy < 0 || iy >= h || e == f) {
        std::memset(r, 0x80, static_cast<size_t>(4 * cols));
        continue;
      }
      std::memset(r, 0x80, static_cast<size_t>(4 * f));
      any = static_cast<uint8_t>(any | interleave_quad(src + iy * w + f - a.pl, h * w, e - f, r + 4 * f));
      std::memset(r + 4 * e, 0x80, static_cast<size_t>(4 * (cols - e)));
    }
    std::memset(qd + 4 * (r1 - r0) * cols, 0x80, static_cast<size_t>(4 * (bplane - (r1 - r0) * cols)));
  }
  return any;
}

// The input positions a strided channel-quad layer reads (QuadGrid): when every tap reads row phase 0 (kh = 1, or
// (i * dh) % sh == 0 for every i; sh > 1) only the rows yy * sh - pt inside the input, else all rows; the same for
// the columns.
void phase_selection(int64_t sh, int64_t k, int64_t d, int64_t pad, int64_t n, int64_t grid_n, int64_t* first,
                     int64_t* step, int64_t* count) {
  *first = 0, *step = 1, *count = n;
  if (sh == 1) return;
  for (int64_t i = 1; i < k; ++i)
    if ((i * d) % sh != 0) return;
  const int64_t y0 = std::max<int64_t>(0, ceil_div(pad, sh, "conv phase rows"));
  const int64_t y1 = std::min(grid_n, floor_div(n - 1 + pad, sh, "conv phase rows") + 1);
  *step = sh;
  *count = std::max<int64_t>(0, y1 - y0);
  *first = *count > 0 ? y0 * sh - pad : 0;
}
QuadGrid quad_selection(const ConvAttrs& a, const PhaseGrid& g, int64_t h, int64_t w) {
  QuadGrid s;
  phase_selection(a.sh, a.kh, a.dh, a.pt, h, g.rows, &s.r0, &s.rstep, &s.rows);
  phase_selection(a.sw, a.kw, a.dw, a.pl, w, g.cols, &s.c0, &s.cstep, &s.cols);
  return s;
}

// The channel-quad planes of `quads` quads with strides (build_phases and the quad interleave in one pass, and only
// the phases some tap reads: `used[r * sw + s]`): quad q's codes are `quad(q)`, 4 channels of the positions `sel`
// selects ([sel.rows][sel.cols] each) `cstride` apart. Phase (r, s) position (yy, xx) holds the input's
// (yy * sh + r - pt, xx * sw + s - pl) or 0x80 (the code 0, sign-flipped) in the padding; each used plane's slack gets
// 0x80 too. Returns the OR of the codes placed.
template <class QuadFn>
uint8_t build_quads_strided(const QuadFn& quad, int64_t cstride, int64_t quads, int64_t h, int64_t w,
                            const ConvAttrs& a, const PhaseGrid& g, const char* used, const QuadGrid& sel,
                            uint8_t* dst) {
  const int64_t sh = g.sh, sw = g.sw, cols = g.cols, rows = g.rows, plane = g.plane;
  thread_local std::vector<int8_t> t_cols;  // a strided row's 4 channels, gathered: [4][cols]
  if (t_cols.size() < static_cast<size_t>(4 * cols)) t_cols.resize(static_cast<size_t>(4 * cols));
  int8_t* const tmp = t_cols.data();
  uint8_t any = 0;
  for (int64_t q = 0; q < quads; ++q) {
    const int8_t* src = quad(q);
    for (int64_t r = 0; r < sh; ++r) {
      for (int64_t s = 0; s < sw; ++s) {
        if (!used[r * sw + s]) continue;
        uint8_t* pd = dst + 4 * (q * sh * sw + r * sw + s) * plane;
        const int64_t f = std::clamp<int64_t>(ceil_div(a.pl - s, sw, "conv phase columns"), 0, cols);
        const int64_t e = std::max(f, std::min(cols, floor_div(w - 1 + a.pl - s, sw, "conv phase columns") + 1));
        for (int64_t yy = 0; yy < rows; ++yy) {
          uint8_t* row = pd + 4 * yy * cols;
          const int64_t iy = yy * sh + r - a.pt;
          const int64_t ri = iy - sel.r0;  // the row's index in the selection: a multiple of step when selected
          if (iy < 0 || iy >= h || e <= f || ri < 0 || ri % sel.rstep != 0 || ri / sel.rstep >= sel.rows) {
            std::memset(row, 0x80, static_cast<size_t>(4 * cols));
            continue;
          }
          // The run's first input column f * sw + s - pl, then every sw-th: sstep apart in the selection.
          const int64_t sstep = sw / sel.cstep;
          const int8_t* s0 = src + (ri / sel.rstep) * sel.cols + (f * sw + s - a.pl - sel.c0) / sel.cstep;
          std::memset(row, 0x80, static_cast<size_t>(4 * f));
          if (sstep == 1) {
            any = static_cast<uint8_t>(any | interleave_quad(s0, cstride, e - f, row + 4 * f));
          } else if (sstep == 2) {
            any = static_cast<uint8_t>(any | interleave_quad_even(s0, cstride, e - f, src + 4 * cstride, row + 4 * f));
          } else {
            for (int64_t i = 0; i < 4; ++i) {
              const int8_t* si = s0 + i * cstride;
              int8_t* ti = tmp + i * cols;
              for (int64_t xx = 0; xx < e - f; ++xx) ti[xx] = si[xx * sstep];
            }
            any = static_cast<uint8_t>(any | interleave_quad(tmp, cols, e - f, row + 4 * f));
          }
          std::memset(row + 4 * e, 0x80, static_cast<size_t>(4 * (cols - e)));
        }
        std::memset(pd + 4 * rows * cols, 0x80, static_cast<size_t>(4 * (plane - rows * cols)));
      }
    }
  }
  return any;
}

// Copies `bytes` (a multiple of 4) from s to d: 16-byte moves, the last one ending at the end (overlapping the one
// before it), so nothing outside [d, d + bytes) is written and nothing outside [s, s + bytes) read.
inline void copy_pixels(const uint8_t* s, uint8_t* d, int64_t bytes) {
#if defined(__SSE2__)
  if (bytes >= 16) {
    int64_t o = 0;
    for (; o + 16 <= bytes; o += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + o), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + o)));
    if (o < bytes)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + bytes - 16),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + bytes - 16)));
    return;
  }
#endif
  std::memcpy(d, s, static_cast<size_t>(bytes));
}

// pack_panel for the output pixels [p0, p0 + n) of an oh x ow output from channel-quad planes: k-group kg of the
// panel is lane l = output pixel (y, x) -> the 4 bytes at runs[kg] + 4 * (y * cols + x) (already sign-flipped), so
// each output row's piece of the panel is one contiguous copy per k-group. Lanes n .. kPanel-1 get 0x80 (the value 0).
void pack_panel_quads(const uint8_t* const* runs, int64_t kgroups, int64_t p0, int64_t n, int64_t ow, int64_t cols,
                      uint8_t* dst) {
  struct Seg {
    int64_t lane, off, bytes;  // first lane; plane position * 4; length * 4
  };
  Seg segs[gemm::kPanel];
  int nseg = 0;
  if (cols == ow) {
    segs[nseg++] = {0, 4 * p0, 4 * n};
  } else {
    for (int64_t l = 0; l < n;) {
      const int64_t p = p0 + l, y = p / ow, x = p % ow, len = std::min(n - l, ow - x);
      segs[nseg++] = {l, 4 * (y * cols + x), 4 * len};
      l += len;
    }
  }
  for (int64_t g = 0; g < kgroups; ++g) {
    const uint8_t* src = runs[g];
    uint8_t* d = dst + g * gemm::kPanel * 4;
    for (int i = 0; i < nseg; ++i) copy_pixels(src + segs[i].off, d + 4 * segs[i].lane, segs[i].bytes);
    if (n < gemm::kPanel) std::memset(d + 4 * n, 0x80, static_cast<size_t>((gemm::kPanel - n) * 4));
  }
}

// The GEMM of weights w over the channel-quad runs of an oh x ow output (rows `cols` quads apart, kgroups runs):
// the kernel reads the runs in place where it can (cols_runs.h: AVX-512 VNNI, or codes in [0, 127] on AVX2 with
// rows of a multiple of 8 pixels), else each pixel panel is copied from them (pack_panel_quads).
void gemm_quads(const PackedWeights& w, const uint8_t* const* runs, int64_t kgroups, int64_t oh, int64_t ow,
                int64_t cols, const Epilogue& ep, void* out, int64_t ldc, const Parallel& par, Kernel kernel) {
  if (gemm::cols_runs_supported(ep, kernel, ow)) {
    gemm::gemm_cols_runs(w, runs, oh, ow, cols, ep, out, ldc, par, kernel);
    return;
  }
  const int64_t p = oh * ow;
  gemm::gemm_cols_source(
      w, p,
      [&](int64_t q, uint8_t* scratch) {
        const int64_t p0 = q * gemm::kPanel, n = std::min<int64_t>(gemm::kPanel, p - p0);
        pack_panel_quads(runs, kgroups, p0, n, ow, cols, scratch);
        return static_cast<const uint8_t*>(scratch);
      },
      ep, out, ldc, par, kernel);
}

}  // namespace

void build_phases(const int8_t* x, int64_t channels, int64_t h, int64_t w, const ConvAttrs& a, const PhaseGrid& g,
                  int8_t* dst) {
  const int64_t sh = g.sh, sw = g.sw, cols = g.cols, rows = g.rows, plane = g.plane;
  // Per column phase q: the columns [first, end) whose input column x*sw + q - pl lies in [0, w).
  int64_t first[64], end[64];
  for (int64_t q = 0; q < sw && q < 64; ++q) {
    // Phase q's column x reads input column x*sw + q - pl: the valid x are ceil((pl - q) / sw) ..
    // floor((w - 1 + pl - q) / sw). Both divisions round toward -infinity/+infinity explicitly: the numerators are
    // negative when sw > w + pl (a narrow input with a large stride), and C++ '/' truncates toward zero, which
    // would admit one column that does not exist (a heap over-read).
    first[q] = std::clamp<int64_t>(ceil_div(a.pl - q, sw, "conv phase columns"), 0, cols);
    end[q] = std::max(first[q], std::min(cols, floor_div(w - 1 + a.pl - q, sw, "conv phase columns") + 1));
  }
  if (sh == 1 && sw == 1) {
    // Unit strides (most layers): one phase, the input plane with its padding; per channel one memset for the top
    // pad, each row's left pad, copy and right pad written in one pass, one memset for the bottom pad and tail.
    const int64_t top = std::min<int64_t>(a.pt, rows), first_row = top, last_row = std::min<int64_t>(rows, a.pt + h);
    const int64_t f = first[0], e = end[0];
    for (int64_t c = 0; c < channels; ++c) {
      const int8_t* plane_in = x + c * h * w;
      int8_t* cdst = dst + c * plane;
      std::memset(cdst, 0, static_cast<size_t>(top * cols));
      for (int64_t yy = first_row; yy < last_row; ++yy) {
        int8_t* row = cdst + yy * cols;
        const int8_t* src = plane_in + (yy - a.pt) * w + f - a.pl;
        for (int64_t xx = 0; xx < f; ++xx) row[xx] = 0;
        if (e > f) std::memcpy(row + f, src, static_cast<size_t>(e - f));
        for (int64_t xx = e > f ? e : f; xx < cols; ++xx) row[xx] = 0;
      }
      std::memset(cdst + last_row * cols, 0, static_cast<size_t>(plane - last_row * cols));
    }
    return;
  }
  for (int64_t c = 0; c < channels; ++c) {
    const int8_t* plane_in = x + c * h * w;
    int8_t* cdst = dst + c * sh * sw * plane;
    for (int64_t yy = 0, r = 0, y = 0; y < rows * sh; ++y) {  // y = yy * sh + r, in input order (no division)
      const int64_t iy = y - a.pt;
      for (int64_t q = 0; q < sw; ++q) {
        int8_t* row = cdst + (r * sw + q) * plane + yy * cols;
        const int64_t f = q < 64 ? first[q] : cols, e = q < 64 ? end[q] : cols;
        if (iy < 0 || iy >= h || f >= e) {
          std::memset(row, 0, static_cast<size_t>(cols));
          continue;
        }
        const int8_t* src = plane_in + iy * w + f * sw + q - a.pl;
        for (int64_t xx = 0; xx < f; ++xx) row[xx] = 0;  // the left padding: a few bytes
        if (sw == 1) {
          std::memcpy(row + f, src, static_cast<size_t>(e - f));
        } else if (sw == 2) {
          even_bytes(src, e - f, plane_in + h * w, row + f);
        } else {
          for (int64_t xx = 0; xx < e - f; ++xx) row[f + xx] = src[xx * sw];
        }
        for (int64_t xx = e; xx < cols; ++xx) row[xx] = 0;
      }
      if (++r == sh) r = 0, ++yy;
    }
    for (int64_t ph = 0; ph < sh * sw; ++ph)
      std::memset(cdst + ph * plane + rows * cols, 0, static_cast<size_t>(plane - rows * cols));
  }
}

namespace {
// ORTQUANT_CONV_ALGO=planes|nhwc, read when a convolution is prepared (session creation), forces the algorithm of
// the convolutions whose caller asks for kAuto (so one benchmark process can compare the algorithms through
// onnxruntime); unset or anything else: the per-layer rule.
ConvAlgo env_algo() {
  const char* e = std::getenv("ORTQUANT_CONV_ALGO");
  if (e == nullptr) return ConvAlgo::kAuto;
  if (std::strcmp(e, "planes") == 0) return ConvAlgo::kPlanes;
  if (std::strcmp(e, "nhwc") == 0) return ConvAlgo::kNhwc;
  return ConvAlgo::kAuto;
}
}  // namespace

// ---- Conv2d ----------------------------------------------------------------------------------------------

Conv2d::Conv2d(const int8_t* w, int64_t m, int64_t cg, const ConvAttrs& a)
    : a_(a), m_(m), cg_(cg), forced_(env_algo()) {
  validate_attrs(a, false);
  if (m < 1 || cg < 1) throw_error("weights must have at least one output and one input channel");
  if (m % a.group != 0)
    throw_error("weights have ", m, " output channels, not a multiple of group ", a.group);
  depthwise_ = cg == 1;
  const int64_t khw = a.kh * a.kw;
  if (depthwise_) {
    w_.assign(w, w + m * khw);
    if (m == a.group) dwn_ = std::make_shared<const DwNhwcWeights>(pack_dw_nhwc(w, m, a.kh, a.kw));
    return;
  }
  const int64_t mg = m / a.group;
  const int64_t k = cg * khw;
  plain_1x1_ = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 && a.pb == 0 && a.pr == 0;
  quad_ = cg % 4 == 0 && !plain_1x1_;
  if (quad_) {
    // Reduction order (tap, channel): wq[j][t * cg + c] = w[j][c][t].
    std::vector<int8_t> wq(static_cast<size_t>(mg * k));
    for (int64_t g = 0; g < a.group; ++g) {
      const int8_t* wg = w + g * mg * k;
      for (int64_t j = 0; j < mg; ++j)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < khw; ++t) wq[static_cast<size_t>(j * k + t * cg + c)] = wg[(j * cg + c) * khw + t];
      packed_quad_.push_back(gemm::pack_weights(wq.data(), mg, k, k, PackedWeights::Layout::kRowBlocks));
    }
  }
  for (int64_t g = 0; g < a.group; ++g)
    packed_.push_back(gemm::pack_weights(w + g * mg * k, mg, k, k, PackedWeights::Layout::kRowBlocks));
}

Shape Conv2d::output_shape(const Shape& x) const {
  check_input(x, cg_ * a_.group, "group * weight channels");
  const int64_t oh = conv_out_dim(x[2], a_.kh, a_.sh, a_.dh, a_.pt, a_.pb, "height");
  const int64_t ow = conv_out_dim(x[3], a_.kw, a_.sw, a_.dw, a_.pl, a_.pr, "width");
  return {x[0], m_, oh, ow};
}


ConvAlgo Conv2d::algo(Kernel kernel, ConvAlgo algo, const Shape* xs, const Epilogue* ep) const {
  if (!dwn_) return ConvAlgo::kPlanes;
  if (algo == ConvAlgo::kAuto) algo = forced_;
  if (algo != ConvAlgo::kAuto) return algo;
  // Measured (BENCHMARKS.md): the channels-last kernel (AVX2 code, run on every vector path) wins on every depthwise
  // layer with at least 8 channels, on AVX2 and on AVX-512 VNNI (Zen 4: 0.77-0.84x MLAS's time, the AVX-512 plane
  // kernel 1.8-2.2x). With fewer channels its 16-channel block is mostly empty, but its stride-1 row kernel
  // (dw_rows_s1: one channel at a time, no block) still applies: measured on a 3-channel 3 x 3 layer over 512 x 512
  // (exm_separable's first, Zen 3, AVX2; BENCHMARKS.md) it takes a fraction of the plane kernel's time.
  const Kernel k = gemm::resolve_kernel(kernel);
  if (k == Kernel::kScalar) return ConvAlgo::kPlanes;
  if (m_ >= 8) return ConvAlgo::kNhwc;
  return xs != nullptr && ep != nullptr && row_kernel(*xs, *ep, k) ? ConvAlgo::kNhwc : ConvAlgo::kPlanes;
}

bool Conv2d::row_kernel(const Shape& xs, const Epilogue& ep, Kernel kernel) const {
  if (!dwn_ || xs.size() != 4) return false;
  const Shape os = output_shape(xs);
  DwNhwcArgs d{nullptr, xs[1], xs[2], xs[3], a_, os[2], os[3], xs[2] + a_.pt + a_.pb, xs[3] + a_.pl + a_.pr,
               dwn_.get(), nullptr, &ep, nullptr};
  d.exact32 = gemm::resolve_kernel(kernel) == Kernel::kAvx512Vnni && ep.kind == gemm::OutKind::kRaw;
  return dw_rows_s1(d);
}

void Conv2d::run(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                 Kernel kernel, ConvAlgo algo_req) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  if (n == 0 || oh * ow == 0) return;
  if (algo(kernel, algo_req, &xs, &ep) == ConvAlgo::kNhwc && run_dw_nhwc(x, xs, ep, out, nullptr, par, kernel))
    return;
  const PhaseGrid g = phase_grid(h, w, a_, oh, ow);
  if (depthwise_) {
    DepthwiseArgs d{x, w_.data(), c, h, w, m_, a_, g, &ep, out};
    const int64_t planes = n * m_;
    const size_t tasks = tasks_for(planes, g.grid() * a_.kh * a_.kw);
    const Kernel kk = gemm::resolve_kernel(kernel);
    // Scratch per task, allocated here (pool tasks must not throw).
    int8_t* const phases =
        thread_scratch_as<int8_t>(ScratchSlot::kDepthwisePhases, tasks * static_cast<size_t>(g.channel_bytes()));
    int32_t* const acc =
        thread_scratch_as<int32_t>(ScratchSlot::kDepthwiseAcc, tasks * static_cast<size_t>(2 * g.grid()));
    par(tasks, [&](size_t t) {
      conv::depthwise(d, planes * static_cast<int64_t>(t) / static_cast<int64_t>(tasks),
                      planes * static_cast<int64_t>(t + 1) / static_cast<int64_t>(tasks),
                      phases + t * static_cast<size_t>(g.channel_bytes()),
                      acc + t * static_cast<size_t>(2 * g.grid()), kk);
    });
    return;
  }
  run_gemm(x, xs, ep, out, nullptr, par, kernel);
}

bool Conv2d::run_dw_nhwc(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const BandSink* sink,
                         const Parallel& par, Kernel kernel) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  DwNhwcArgs d{x, c, h, w, a_, oh, ow, h + a_.pt + a_.pb, w + a_.pl + a_.pr, dwn_.get(), nullptr, &ep, out};
  d.sink = sink;
  const Kernel kk = gemm::resolve_kernel(kernel);
  d.exact32 = kk == Kernel::kAvx512Vnni && ep.kind == gemm::OutKind::kRaw;
  d.band = dw_nhwc_band(d);
  const int64_t scratch = dw_nhwc_scratch(d);
  if (scratch <= 0) return false;
  // Byte offset of every tap in the padded block (the pad tap of an odd count repeats the last, weight 0).
  std::vector<int64_t> off(static_cast<size_t>(2 * dwn_->pairs));
  for (int64_t t = 0; t < 2 * dwn_->pairs; ++t) {
    const int64_t tt = std::min(t, dwn_->taps - 1);
    off[static_cast<size_t>(t)] = ((tt / a_.kw) * a_.dh * d.wp + (tt % a_.kw) * a_.dw) * kDwBlock;
  }
  d.tap_off = off.data();
  d.shift = dw_nhwc_shift(ep, ep.bias, c, dwn_->taps);
  const int64_t units = dw_nhwc_units(d, n);
  const size_t tasks = tasks_for(units, d.band * ow * kDwBlock * dwn_->taps * 8);
  int8_t* const buf = thread_scratch_as<int8_t>(ScratchSlot::kDepthwisePhases, tasks * static_cast<size_t>(scratch));
  par(tasks, [&](size_t t) {
    dw_nhwc(d, units * static_cast<int64_t>(t) / static_cast<int64_t>(tasks),
            units * static_cast<int64_t>(t + 1) / static_cast<int64_t>(tasks), buf + t * static_cast<size_t>(scratch),
            kk);
  });
  return true;
}

bool Conv2d::dw_raw_ok(const Shape& xs, Kernel kernel, const Epilogue* ep) const {
  if (!dwn_ || algo(kernel, ConvAlgo::kAuto, &xs, ep) != ConvAlgo::kNhwc) return false;
  const Shape os = output_shape(xs);
  if (os[0] == 0 || os[2] * os[3] == 0) return true;
  DwNhwcArgs d{nullptr, xs[1], xs[2], xs[3], a_, os[2], os[3], xs[2] + a_.pt + a_.pb, xs[3] + a_.pl + a_.pr,
               dwn_.get(), nullptr, nullptr, nullptr};
  const auto none_fn = [](int64_t, int64_t, int64_t, int64_t, const int32_t*) {};
  const BandSink none = none_fn;  // a sink that is never called: only the scratch size is asked
  d.sink = &none;
  d.band = dw_nhwc_band(d);
  return dw_nhwc_scratch(d) > 0;
}

void Conv2d::run_raw_dw(const int8_t* x, const Shape& xs, const Epilogue& ep, const BandSink& sink,
                        const Parallel& par, Kernel kernel, int32_t pad_code) const {
  if (!dw_raw_ok(xs, kernel, &ep))
    throw_error("run_raw_dw: this convolution does not take the channels-last depthwise kernel");
  if (ep.kind != gemm::OutKind::kRaw) throw_error("run_raw_dw: the epilogue must produce raw sums");
  if (pad_code < -128 || pad_code > 127)
    throw_error("run_raw_dw: the padding code must lie in [-128, 127], got ", pad_code);
  const Shape os = output_shape(xs);
  if (os[0] == 0 || os[2] * os[3] == 0) return;
  const bool pads = a_.pt != 0 || a_.pl != 0 || a_.pb != 0 || a_.pr != 0;
  if (pad_code == 0 || !pads) {
    if (!run_dw_nhwc(x, xs, ep, nullptr, &sink, par, kernel)) throw_error("run_raw_dw: scratch size overflows");
    return;
  }
  // The kernels hand the sink their own scratch rows (written by them, not shared): corrected there in place.
  const PadEdges edges = pad_edges(xs[2], xs[3], pad_code);
  const auto padded_fn = [&](int64_t b, int64_t c, int64_t y0, int64_t y1, const int32_t* sums) {
    add_pad_rows(edges, const_cast<int32_t*>(sums), c, y0, y1, xs[2], xs[3], pad_code);
    sink(b, c, y0, y1, sums);
  };
  const BandSink padded = padded_fn;  // a reference to the named lambda (FunctionRef)
  if (!run_dw_nhwc(x, xs, ep, nullptr, &padded, par, kernel)) throw_error("run_raw_dw: scratch size overflows");
}

Conv2d::PadEdges Conv2d::pad_edges(int64_t h, int64_t w, int32_t pad_code) const {
  PadEdges e;
  e.ow = conv_out_dim(w, a_.kw, a_.sw, a_.dw, a_.pl, a_.pr, "width");
  // Columns [cl, cr) read no padding column: ox * sw >= pl and ox * sw - pl + (kw - 1) * dw <= w - 1.
  e.cl = std::min(e.ow, (a_.pl + a_.sw - 1) / a_.sw);
  const int64_t last = w - 1 + a_.pl - (a_.kw - 1) * a_.dw;
  e.cr = std::max(e.cl, last < 0 ? int64_t{0} : std::min(e.ow, last / a_.sw + 1));
  const int64_t ne = e.cl + e.ow - e.cr, khw = a_.kh * a_.kw;
  e.edge.assign(static_cast<size_t>(checked_mul(m_, ne, "depthwise padding edges")), 0);
  for (int64_t j = 0; j < m_; ++j)
    for (int64_t k = 0; k < ne; ++k) {
      const int64_t ox = k < e.cl ? k : e.cr + k - e.cl;
      int64_t t = 0;
      for (int64_t jj = 0; jj < a_.kw; ++jj) {
        const int64_t ix = ox * a_.sw - a_.pl + jj * a_.dw;
        if (ix < 0 || ix >= w)
          for (int64_t i = 0; i < a_.kh; ++i) t += w_[static_cast<size_t>(j * khw + i * a_.kw + jj)];
      }
      e.edge[static_cast<size_t>(j * ne + k)] = static_cast<int32_t>(t * pad_code);
    }
  return e;
}

void Conv2d::add_pad_rows(const PadEdges& e, int32_t* sums, int64_t j, int64_t y0, int64_t y1, int64_t h, int64_t w,
                          int32_t pad_code) const {
  const int64_t kh = a_.kh, kw = a_.kw, ow = e.ow, cl = e.cl, cr = e.cr, nl = cl, ne = cl + ow - cr;
  const int8_t* wj = w_.data() + j * kh * kw;
  const int32_t* edge = e.edge.data() + j * ne;
  const auto row_ok = [&](int64_t oy, int64_t i) {
    const int64_t iy = oy * a_.sh - a_.pt + i * a_.dh;
    return iy >= 0 && iy < h;
  };
  // Rows [rl, rr) read no padding row: oy * sh >= pt and oy * sh - pt + (kh - 1) * dh <= h - 1.
  const int64_t rl = std::max(y0, std::min(y1, (a_.pt + a_.sh - 1) / a_.sh));
  const int64_t last = h - 1 + a_.pt - (kh - 1) * a_.dh;
  const int64_t rr = std::max(rl, last < 0 ? rl : std::min(y1, last / a_.sh + 1));
  for (int64_t oy = rl; oy < rr; ++oy) {
    int32_t* row = sums + (oy - y0) * ow;
    for (int64_t ox = 0; ox < cl; ++ox) row[ox] += edge[ox];
    for (int64_t ox = cr; ox < ow; ++ox) row[ox] += edge[nl + ox - cr];
  }
  for (int64_t oy = y0; oy < y1; ++oy) {
    if (oy == rl) oy = rr;  // rows [rl, rr) are done
    if (oy >= y1) break;
    int32_t* row = sums + (oy - y0) * ow;
    // A row at the top or bottom: pad_code times the weights of every tap that reads padding.
    int64_t rows_pad = 0;
    for (int64_t i = 0; i < kh; ++i)
      if (!row_ok(oy, i))
        for (int64_t jj = 0; jj < kw; ++jj) rows_pad += wj[i * kw + jj];
    const int32_t add = static_cast<int32_t>(rows_pad * pad_code);
    for (int64_t ox = cl; ox < cr; ++ox) row[ox] += add;
    for (int64_t k = 0; k < ne; ++k) {
      const int64_t ox = k < cl ? k : cr + k - cl;
      int64_t t = 0;
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t jj = 0; jj < kw; ++jj) {
          const int64_t ix = ox * a_.sw - a_.pl + jj * a_.dw;
          if (!row_ok(oy, i) || ix < 0 || ix >= w) t += wj[i * kw + jj];
        }
      row[ox] += static_cast<int32_t>(t * pad_code);
    }
  }
}

void Conv2d::add_pad_sums(int32_t* sums, int64_t j, int64_t y0, int64_t y1, int64_t h, int64_t w,
                          int32_t pad_code) const {
  if (!depthwise_ || j < 0 || j >= m_) throw_error("add_pad_sums: a depthwise layer's output channel, got ", j);
  add_pad_rows(pad_edges(h, w, pad_code), sums, j, y0, y1, h, w, pad_code);
}

void Conv2d::run_raw(const int8_t* x, const Shape& xs, const Epilogue& ep, const RawSink& sink, const Parallel& par,
                     Kernel kernel, int64_t plane_stride) const {
  if (!gemm_path()) throw_error("run_raw: this convolution runs on a depthwise kernel, not the GEMM path");
  if (ep.kind != gemm::OutKind::kRaw) throw_error("run_raw: the epilogue must produce raw sums");
  const Shape os = output_shape(xs);
  if (plane_stride != 0 && (!plain_1x1_ || plane_stride < xs[2] * xs[3]))
    throw_error("run_raw: a plane stride needs a plain 1x1 layer and at least h * w = ", xs[2] * xs[3]);
  if (os[0] == 0 || os[2] * os[3] == 0) return;
  run_gemm(x, xs, ep, nullptr, &sink, par, kernel, nullptr, plane_stride);
}

bool Conv2d::quads_1x1(Kernel kernel, int64_t np) const {
  // AVX2 only: measured there (Zen 3); the AVX-512 packing moves a panel in a few wide steps.
  return plain_1x1_ && cg_ % 4 == 0 && np >= 64 && np % 8 == 0 && cg_ * np <= kQuadMaxBytes &&
         gemm::resolve_kernel(kernel) == Kernel::kAvx2;
}

bool Conv2d::quad_fill_ok(const Shape& xs) const {
  if (!quad_) return false;
  const Shape os = output_shape(xs);
  return cg_ * phase_grid(xs[2], xs[3], a_, os[2], os[3]).channel_bytes() <= kQuadMaxBytes;
}

bool Conv2d::bands_ok(const Shape& xs) const {
  if (!quad_ || a_.sh != 1 || a_.sw != 1) return false;
  const Shape os = output_shape(xs);
  return cg_ * phase_grid(xs[2], xs[3], a_, os[2], os[3]).channel_bytes() > kQuadMaxBytes;
}

void Conv2d::run_raw_bands(const int8_t* x, const Shape& xs, const Epilogue& ep, const BandSink& sink,
                           const Parallel& par, Kernel kernel) const {
  if (!bands_ok(xs)) throw_error("run_raw_bands: this convolution does not take the banded channel-quad path");
  if (ep.kind != gemm::OutKind::kRaw) throw_error("run_raw_bands: the epilogue must produce raw sums");
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  if (n == 0 || oh * ow == 0) return;
  const PhaseGrid g = phase_grid(h, w, a_, oh, ow);
  const int64_t mg = m_ / a_.group, taps = a_.kh * a_.kw, quads = cg_ / 4, kgroups = taps * quads, cols = g.cols;
  const int64_t halo = (a_.kh - 1) * a_.dh;
  // Output rows per band: its int32 sums within kBandSumBytes (rescaled by the sink while in L2) and its quad planes
  // within kQuadMaxBytes (the pixel panels copy from them), at least one row. Measured on ESPCN's 128 x 128 layers
  // (Zen 3): 4-row bands (128 KiB of sums) beat 2 rows by 12 %, 8 rows by 1 %, 16 rows by 5 %.
  const int64_t by_sums = kBandSumBytes / checked_mul(checked_mul(4, mg, "band sums"), ow, "band sums");
  const int64_t by_planes = kQuadMaxBytes / checked_mul(cg_, cols, "band planes") - halo;
  const int64_t band = std::clamp<int64_t>(std::min(by_sums, by_planes), 1, oh);
  const int64_t slack = (a_.kw - 1) * a_.dw + 1;
  // Bytes per channel of one band's planes (each of its rows is a row of the padded input, so within phase_grid's).
  const int64_t bplane = (band + halo) * cols + slack;
  auto* const planes =
      thread_scratch_as<uint8_t>(ScratchSlot::kConvPhases, static_cast<size_t>(checked_mul(cg_, bplane, "band planes")));
  auto* const sums = thread_scratch_as<int32_t>(
      ScratchSlot::kConvGrid, static_cast<size_t>(checked_mul(checked_mul(mg, band, "band sums"), ow, "band sums")));
  const uint8_t** const runs = thread_scratch_as<const uint8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(kgroups));
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t off = (t / a_.kw) * a_.dh * cols + (t % a_.kw) * a_.dw;
    for (int64_t q = 0; q < quads; ++q) runs[t * quads + q] = planes + 4 * (q * bplane + off);
  }
  const size_t build_tasks = std::min<size_t>(tasks_for(cg_, 64 * (band + halo) * cols), static_cast<size_t>(quads));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < a_.group; ++gi) {
      const int8_t* xg = x + (b * c + gi * cg_) * h * w;
      Epilogue eg = ep;
      if (ep.bias) eg.bias = ep.bias + gi * mg;
      for (int64_t y0 = 0; y0 < oh; y0 += band) {
        const int64_t y1 = std::min(oh, y0 + band);
        par(build_tasks, [&](size_t t) {
          const int64_t q0 = quads * static_cast<int64_t>(t) / static_cast<int64_t>(build_tasks);
          const int64_t q1 = quads * static_cast<int64_t>(t + 1) / static_cast<int64_t>(build_tasks);
          build_quads_rows(xg + 4 * q0 * h * w, q1 - q0, h, w, a_, cols, y0, y1 + halo, bplane,
                           planes + 4 * q0 * bplane);
        });
        gemm_quads(packed_quad_[static_cast<size_t>(gi)], runs, kgroups, y1 - y0, ow, cols, eg, sums, (y1 - y0) * ow,
                   par, kernel);
        sink(b, gi, y0, y1, sums);
      }
    }
  }
}

void Conv2d::run_raw_fill(const QuadFill& fill, const Shape& xs, const Epilogue& ep, const RawSink& sink,
                          const Parallel& par, Kernel kernel) const {
  if (!quad_fill_ok(xs)) throw_error("run_raw_fill: this convolution does not take the channel-quad path");
  if (ep.kind != gemm::OutKind::kRaw) throw_error("run_raw_fill: the epilogue must produce raw sums");
  const Shape os = output_shape(xs);
  if (os[0] == 0 || os[2] * os[3] == 0) return;
  run_gemm(nullptr, xs, ep, nullptr, &sink, par, kernel, &fill);
}

void Conv2d::run_gemm(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const RawSink* sink,
                      const Parallel& par, Kernel kernel, const QuadFill* fill, int64_t plane_stride) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  // Distance between channel planes (only the direct 1x1 path below reads planes that are not h * w apart).
  const int64_t ps = plane_stride == 0 ? h * w : plane_stride;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(ep.kind));
  const PhaseGrid g = phase_grid(h, w, a_, oh, ow);
  const int64_t mg = m_ / a_.group;
  const int64_t k = cg_ * a_.kh * a_.kw;
  // Whether the packing proves non-negative panels (with_proven_x_max's rule: no promise yet, the AVX2 kernel).
  const bool prove = ep.x_max < 0 && gemm::resolve_kernel(kernel) == Kernel::kAvx2;
  if (quad_ && cg_ * g.channel_bytes() <= kQuadMaxBytes) {
    // Per image and group: the phase planes (build_phases) interleaved by channel quads, then each pixel panel is
    // copied from them (pack_panel_quads); only the output's pixels are computed, so the GEMM writes NCHW directly.
    const int64_t taps = a_.kh * a_.kw, quads = cg_ / 4, kgroups = taps * quads, cbytes = g.channel_bytes();
    // The quad planes straight from the code rows (build_quads_unit, build_quads_strided), no phase planes in
    // between; with strides only the phases some tap reads (a 1x1 stride-2 layer: one of four).
    const bool unit = a_.sh == 1 && a_.sw == 1;
    // A 1-D layer with many channels: its planes in bands of outputs (build_quads_bands), read as a grid of `bands`
    // rows of `band` outputs whose row stride is `vcols` positions; otherwise the oh x ow grid of g.cols.
    const int64_t band = unit && a_.kh == 1 && g.rows == 1 && oh == 1 ? quad_band_1d(quads, ow) : 0;
    const int64_t bands = band > 0 ? ow / band : 0, bplane = band + (a_.kw - 1) * a_.dw + 1;
    const int64_t voh = band > 0 ? bands : oh, vow = band > 0 ? band : ow, vcols = band > 0 ? quads * bplane : g.cols;
    const int64_t bytes = band > 0 ? 4 * bands * quads * bplane : cg_ * cbytes;
    auto* const qplanes =  // [quad][phase][position][4], or banded [band][quad][position][4]
        thread_scratch_as<uint8_t>(ScratchSlot::kConvPhases, static_cast<size_t>(bytes));
    std::vector<char> used(unit ? 0 : static_cast<size_t>(g.sh * g.sw), 0);
    for (int64_t t = 0; t < taps && !unit; ++t)
      used[static_cast<size_t>((((t / a_.kw) * a_.dh) % g.sh) * g.sw + ((t % a_.kw) * a_.dw) % g.sw)] = 1;
    // The positions a fill quantizes (all unless every tap reads one row or column phase); a codes tensor has all.
    const QuadGrid sel = fill != nullptr && !unit ? quad_selection(a_, g, h, w) : QuadGrid{0, 1, h, 0, 1, w};
    // Run of k-group (tap t, quad q): the tap's phase plane in quad q at the tap's offset (tap_run's arithmetic);
    // output (y, x) reads it at + 4 * (y * g.cols + x).
    const uint8_t** const runs = thread_scratch_as<const uint8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(kgroups));
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t ri = (t / a_.kw) * a_.dh, rj = (t % a_.kw) * a_.dw;
      const int64_t off = ((ri % g.sh) * g.sw + rj % g.sw) * g.plane + (ri / g.sh) * g.cols + rj / g.sw;
      for (int64_t q = 0; q < quads; ++q)
        runs[t * quads + q] = band > 0 ? qplanes + 4 * (q * bplane + rj) : qplanes + 4 * (q * cbytes + off);
    }
    char* const grid_out =
        sink == nullptr ? nullptr : thread_scratch_as<char>(ScratchSlot::kConvGrid, static_cast<size_t>(mg * oh * ow * es));
    const size_t build_tasks = std::min<size_t>(tasks_for(cg_, 64 * cbytes), static_cast<size_t>(quads));
    uint8_t task_or[64] = {};
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t gi = 0; gi < a_.group; ++gi) {
        const int8_t* xg = x == nullptr ? nullptr : x + (b * c + gi * cg_) * h * w;
        par(build_tasks, [&](size_t t) {
          const int64_t q0 = quads * static_cast<int64_t>(t) / static_cast<int64_t>(build_tasks);
          const int64_t q1 = quads * static_cast<int64_t>(t + 1) / static_cast<int64_t>(build_tasks);
          uint8_t* const qd = qplanes + 4 * q0 * cbytes;
          if (fill != nullptr) {
            // Each quad's codes written by the caller into a small buffer (L1), then straight into the quad planes.
            thread_local std::vector<int8_t> t_quad;
            const int64_t cs = sel.rows * sel.cols;
            if (t_quad.size() < static_cast<size_t>(4 * cs)) t_quad.resize(static_cast<size_t>(4 * cs));
            int8_t* const qbuf = t_quad.data();
            auto quad = [&](int64_t q) {
              (*fill)(b, gi * cg_ + 4 * (q0 + q), sel, qbuf);
              return static_cast<const int8_t*>(qbuf);
            };
            task_or[t] = band > 0 ? build_quads_bands(quad, cs, q0, q1, quads, w, a_.pl, band, bands, bplane, qplanes)
                         : unit     ? build_quads_unit(quad, cs, q1 - q0, h, w, a_, g, qd)
                                    : build_quads_strided(quad, cs, q1 - q0, h, w, a_, g, used.data(), sel, qd);
          } else {
            const int8_t* const xq = xg + 4 * q0 * h * w;
            auto quad = [&](int64_t q) { return xq + 4 * q * h * w; };
            task_or[t] = band > 0 ? build_quads_bands(quad, h * w, q0, q1, quads, w, a_.pl, band, bands, bplane, qplanes)
                         : unit     ? build_quads_unit(quad, h * w, q1 - q0, h, w, a_, g, qd)
                                    : build_quads_strided(quad, h * w, q1 - q0, h, w, a_, g, used.data(), sel, qd);
          }
        });
        uint8_t any = 0;
        for (size_t t = 0; t < build_tasks; ++t) any = static_cast<uint8_t>(any | task_or[t]);
        Epilogue eg = ep;
        if (ep.bias) eg.bias = ep.bias + gi * mg;
        // The padding bytes are 0: the OR of the planes is the OR of the image's values and 0.
        if (prove) eg.x_max = x_max_of_or(any);
        char* dst = sink ? grid_out : static_cast<char*>(out) + (b * m_ + gi * mg) * oh * ow * es;
        // voh x vow is the output's oh x ow pixels (a 1-D layer's bands divide its row exactly: quad_band_1d).
        gemm_quads(packed_quad_[static_cast<size_t>(gi)], runs, kgroups, voh, vow, vcols, eg, dst, oh * ow, par, kernel);
        if (sink != nullptr) (*sink)(b, gi, reinterpret_cast<const int32_t*>(grid_out), ow);
      }
    }
    return;
  }
  // A 1x1 convolution with unit strides and no padding reads the input planes as they are.
  const bool direct = a_.kh == 1 && a_.kw == 1 && a_.sh == 1 && a_.sw == 1 && a_.pt == 0 && a_.pl == 0 &&
                      a_.pb == 0 && a_.pr == 0;
  // Phase planes wider than the output: pack only the output's pixels (pack_panel_grid) when rows are long enough.
  const bool segmented = !direct && g.cols != ow && ow >= 16;
  const int64_t cols = direct || segmented ? ow : g.cols;  // row stride of the GEMM's output
  const int64_t grid = oh * cols;
  int8_t* phases = nullptr;
  if (!direct) {
    const int64_t bytes = cg_ * g.channel_bytes();
    int8_t* const buf =
        thread_scratch_as<int8_t>(ScratchSlot::kConvPhases, static_cast<size_t>(bytes + 2 * kPhaseSlack));
    // pack_panel_grid reads up to 15 bytes around a run: defined bytes (they land in lanes overwritten later).
    std::memset(buf, 0, static_cast<size_t>(kPhaseSlack));
    std::memset(buf + kPhaseSlack + bytes, 0, static_cast<size_t>(kPhaseSlack));
    phases = buf + kPhaseSlack;
  }
  const int8_t** const rows = thread_scratch_as<const int8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(k));
  // Outputs computed on the grid's extra columns go to a scratch grid first, then the valid ones are copied out
  // (or handed to the sink, which always gets the scratch grid).
  char* const grid_out = cols == ow && sink == nullptr
                             ? nullptr
                             : thread_scratch_as<char>(ScratchSlot::kConvGrid, static_cast<size_t>(mg * grid * es));
  const size_t build_tasks = direct ? 1 : tasks_for(cg_, 64 * g.channel_bytes());
  if (!direct) {
    // k = (channel, i, j): each im2col row is one contiguous run of a phase plane. The phase buffer is the same for
    // every image and group, so the row pointers are computed once per call (tap offsets once per tap).
    const int64_t taps = a_.kh * a_.kw;
    int64_t* const tap_off = thread_scratch_as<int64_t>(ScratchSlot::kConvTaps, static_cast<size_t>(taps));
    for (int64_t t = 0; t < taps; ++t) tap_off[t] = tap_run(phases, g, a_, 0, t / a_.kw, t % a_.kw) - phases;
    const int64_t cstride = g.channel_bytes();
    for (int64_t ch = 0; ch < cg_; ++ch)
      for (int64_t t = 0; t < taps; ++t) rows[ch * taps + t] = phases + ch * cstride + tap_off[t];
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < a_.group; ++gi) {
      const int8_t* xg = x + (b * c + gi * cg_) * ps;
      if (direct && quads_1x1(kernel, oh * ow)) {
        // The channel quads of the call's pixels interleaved once (4 sequential streams at a time), then read in
        // place by the kernel (pack_panel gathered each 64-pixel panel from all cg_ planes, one cache line from
        // each: 41 % of the library's samples of a 64 -> 32 channel layer on 256 x 256 codes on Zen 3, in bands of
        // 4 rows; this way the layer takes about 0.86x the time). The planes lie 4 * (np + 16) bytes apart: 4 KiB
        // apart (np = 1024), a unit's k-groups fell into the same L1 sets and the gain was lost.
        const int64_t np = oh * ow, quads = cg_ / 4, qs = np + 16;  // planes 64 bytes past a 4 KiB multiple apart
        auto* const qp = thread_scratch_as<uint8_t>(ScratchSlot::kConvPhases, static_cast<size_t>(4 * quads * qs));
        const uint8_t** const runs = thread_scratch_as<const uint8_t*>(ScratchSlot::kConvTaps, static_cast<size_t>(quads));
        uint8_t any = 0;
        for (int64_t q = 0; q < quads; ++q) {
          any = static_cast<uint8_t>(any | interleave_quad(xg + 4 * q * ps, ps, np, qp + 4 * q * qs));
          runs[q] = qp + 4 * q * qs;
        }
        Epilogue eg = ep;
        if (ep.bias) eg.bias = ep.bias + gi * mg;
        if (prove) eg.x_max = x_max_of_or(any);
        char* og = sink ? nullptr : static_cast<char*>(out) + (b * m_ + gi * mg) * oh * ow * es;
        char* dst = grid_out == nullptr ? og : grid_out;
        gemm_quads(packed_[static_cast<size_t>(gi)], runs, quads, 1, np, np, eg, dst, grid, par, kernel);
        if (sink != nullptr) (*sink)(b, gi, reinterpret_cast<const int32_t*>(grid_out), cols);
        continue;
      }
      if (direct) {
        for (int64_t kk = 0; kk < k; ++kk) rows[kk] = xg + kk * ps;
      } else {
        par(build_tasks, [&](size_t t) {
          const int64_t c0 = cg_ * static_cast<int64_t>(t) / static_cast<int64_t>(build_tasks);
          const int64_t c1 = cg_ * static_cast<int64_t>(t + 1) / static_cast<int64_t>(build_tasks);
          build_phases(xg + c0 * h * w, c1 - c0, h, w, a_, g, phases + c0 * g.channel_bytes());
        });
      }
      // Non-negative inputs (a ReLU before the layer, the usual case) take the cheaper exact AVX2 product.
      // pack_panel_grid proves it per panel from the bytes it moves (no pass over the input of its own); the other
      // layers scan the input once per image and group. (A 1x1 layer packed and proven per panel from its input
      // planes was 4-10 % faster at batch 1 but 7 % slower at batch 8 on Zen 3: its plane streams read straight
      // from memory were slower than the scan's one sequential stream, with software prefetching or without.)
      Epilogue eg = ep;
      if (ep.bias) eg.bias = ep.bias + gi * mg;
      const int32_t image_x_max = !prove || segmented ? int32_t{-1}
                                  : ps == h * w       ? gemm::proven_x_max(xg, 1, cg_ * h * w, 0)
                                                      : gemm::proven_x_max(xg, cg_, h * w, ps);
      char* og = sink ? nullptr : static_cast<char*>(out) + (b * m_ + gi * mg) * oh * ow * es;
      char* dst = grid_out == nullptr ? og : grid_out;
      gemm::gemm_cols_source_proven(
          packed_[static_cast<size_t>(gi)], grid,
          [&](int64_t q, uint8_t* scratch, int32_t* x_max) {
            const int64_t p0 = q * gemm::kPanel;
            const int64_t np = std::min<int64_t>(gemm::kPanel, grid - p0);
            if (segmented) {
              *x_max = x_max_of_or(pack_panel_grid(rows, k, p0, np, ow, g.cols, scratch));
            } else {
              gemm::pack_panel(rows, k, p0, np, scratch);
              *x_max = image_x_max;
            }
            return static_cast<const uint8_t*>(scratch);
          },
          eg, dst, grid, par, kernel);
      if (sink != nullptr) {
        (*sink)(b, gi, reinterpret_cast<const int32_t*>(grid_out), cols);
      } else if (grid_out != nullptr) {
        for (int64_t r = 0; r < mg * oh; ++r)
          std::memcpy(og + r * ow * es, grid_out + r * cols * es, static_cast<size_t>(ow * es));
      }
    }
  }
}

// ---- ConvTranspose2d -------------------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(const int8_t* w, int64_t c, int64_t mg, const ConvAttrs& a)
    : a_(a), c_(c), mg_(mg) {
  validate_attrs(a, true);
  if (c < 1 || mg < 1) throw_error("weights must have at least one input and one output channel");
  if (c % a.group != 0) throw_error("weights have ", c, " input channels, not a multiple of group ", a.group);
  const int64_t cg = c / a.group;
  const int64_t khw = a.kh * a.kw;
  // Each output sums at most cg * kh * kw products of magnitude <= 128 * 128 = 2^14 (fewer with strides).
  acc32_ = cg <= (int64_t{1} << 17) && checked_mul(cg, khw, "transposed convolution reduction") < (int64_t{1} << 17);
  // Rows r = (oc, i, j) of group g, reduction over the group's input channels: W_t[r][ic] = w[ic][oc][i][j].
  for (int64_t g = 0; g < a.group; ++g)
    packed_.push_back(gemm::pack_weights_strided(w + g * cg * mg * khw, mg * khw, cg, 1, mg * khw,
                                                 PackedWeights::Layout::kRowBlocks));
}

Shape ConvTranspose2d::output_shape(const Shape& x) const {
  check_input(x, c_, "weight input channels");
  const int64_t oh = conv_transpose_out_dim(x[2], a_.kh, a_.sh, a_.dh, a_.pt, a_.pb, a_.oph, "height");
  const int64_t ow = conv_transpose_out_dim(x[3], a_.kw, a_.sw, a_.dw, a_.pl, a_.pr, a_.opw, "width");
  return {x[0], mg_ * a_.group, oh, ow};
}

namespace {

// floor(v) for v already clamped to an int32 range (the saturation bounds of o_bits <= 32): truncation toward
// zero, then one step down for a negative non-integer. Written without branches so that it vectorizes (SSE2
// cvttpd2dq / cmppd): the data decides the step, and a mispredicted branch per element cost more than the rest of
// the transposed convolution.
inline int32_t floor_clamped(double v) {
  const int32_t t = static_cast<int32_t>(v);
  return t - static_cast<int32_t>(static_cast<double>(t) > v);
}

// One output row of the transposed convolution: the epilogue of store_scalar_wide (same float64 arithmetic, the
// saturation applied before the floor, which is the same for integer bounds because floor is monotonic) with the
// output kind chosen once per row instead of per element. shift >= 0 (dw_nhwc_shift: an integer kind with ratio
// 2^-shift whose sums, bias and rounding stay within int32): the same values in int32 as (sum + bias + half) >> shift,
// clamped, which the compiler vectorizes; exact because (sum + bias) * 2^-shift + 0.5 is exact in float64.
template <typename Acc>
void store_row(const gemm::Epilogue& ep, const Acc* acc, int64_t n, int32_t bias, char* dst, int shift) {
  using gemm::OutKind;
  if constexpr (std::is_same_v<Acc, int32_t>) {
    if (shift >= 0) {
      const int32_t add = bias + (shift > 0 ? int32_t{1} << (shift - 1) : 0);
      const auto lo32 = static_cast<int32_t>(ep.lo), hi32 = static_cast<int32_t>(ep.hi);
      auto q_of = [&](int32_t a) {
        const int32_t v = (a + add) >> shift;
        return v < lo32 ? lo32 : (v > hi32 ? hi32 : v);
      };
      if (ep.kind == OutKind::kInt8) {
        auto* o = reinterpret_cast<int8_t*>(dst);
        for (int64_t q = 0; q < n; ++q) o[q] = static_cast<int8_t>(q_of(acc[q]));
      } else if (ep.kind == OutKind::kInt16) {
        auto* o = reinterpret_cast<int16_t*>(dst);
        for (int64_t q = 0; q < n; ++q) o[q] = static_cast<int16_t>(q_of(acc[q]));
      } else {
        auto* o = reinterpret_cast<int32_t*>(dst);
        for (int64_t q = 0; q < n; ++q) o[q] = q_of(acc[q]);
      }
      return;
    }
  }
  const double b = static_cast<double>(bias);
  switch (ep.kind) {
    case OutKind::kRaw: {
      auto* o = reinterpret_cast<int32_t*>(dst);
      for (int64_t q = 0; q < n; ++q)
        o[q] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(acc[q]))));
      return;
    }
    case OutKind::kFloat: {
      auto* o = reinterpret_cast<float*>(dst);
      if (ep.fdiv != 0.0) {
        for (int64_t q = 0; q < n; ++q) o[q] = static_cast<float>((static_cast<double>(acc[q]) + b) / ep.fdiv);
      } else {
        for (int64_t q = 0; q < n; ++q) o[q] = static_cast<float>((static_cast<double>(acc[q]) + b) * ep.fscale);
      }
      return;
    }
    default: break;
  }
  // Saturation bounds within int32 (o_bits <= 32 always gives such bounds; the clamp keeps the cast defined).
  const double lo = std::max(ep.lo, -2147483648.0), hi = std::min(ep.hi, 2147483647.0), r = ep.ratio;
  auto q_of = [&](Acc a) {
    const double v = (static_cast<double>(a) + b) * r + 0.5;
    return floor_clamped(std::max(lo, std::min(hi, v)));
  };
  int64_t q = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<Acc, int32_t>) {
    // Four at a time in SSE2 (the baseline ISA), the same float64 operations as q_of in the same order.
    const __m128d vb = _mm_set1_pd(b), vr = _mm_set1_pd(r), half = _mm_set1_pd(0.5);
    const __m128d vlo = _mm_set1_pd(lo), vhi = _mm_set1_pd(hi);
    auto two = [&](__m128i a2) {  // the low two int32 lanes of a2 -> their two int32 results in the low lanes
      __m128d v = _mm_add_pd(_mm_mul_pd(_mm_add_pd(_mm_cvtepi32_pd(a2), vb), vr), half);
      v = _mm_max_pd(vlo, _mm_min_pd(vhi, v));
      const __m128i t = _mm_cvttpd_epi32(v);
      const __m128d gt = _mm_cmpgt_pd(_mm_cvtepi32_pd(t), v);  // all-ones 64-bit lanes where t > v
      return _mm_add_epi32(t, _mm_shuffle_epi32(_mm_castpd_si128(gt), _MM_SHUFFLE(3, 3, 2, 0)));
    };
    for (; q + 4 <= n; q += 4) {
      const __m128i a4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + q));
      const __m128i r4 = _mm_unpacklo_epi64(two(a4), two(_mm_unpackhi_epi64(a4, a4)));
      if (ep.kind == OutKind::kInt8) {
        const __m128i p16 = _mm_packs_epi32(r4, r4);  // in range already: the packs do not saturate
        const __m128i p = _mm_packs_epi16(p16, p16);
        const int32_t v4 = _mm_cvtsi128_si32(p);
        std::memcpy(dst + q, &v4, 4);
      } else if (ep.kind == OutKind::kInt16) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 2 * q), _mm_packs_epi32(r4, r4));
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * q), r4);
      }
    }
  }
#endif
  if (ep.kind == OutKind::kInt8) {
    auto* o = reinterpret_cast<int8_t*>(dst);
    for (; q < n; ++q) o[q] = static_cast<int8_t>(q_of(acc[q]));
  } else if (ep.kind == OutKind::kInt16) {
    auto* o = reinterpret_cast<int16_t*>(dst);
    for (; q < n; ++q) o[q] = static_cast<int16_t>(q_of(acc[q]));
  } else {
    auto* o = reinterpret_cast<int32_t*>(dst);
    for (; q < n; ++q) o[q] = static_cast<int32_t>(q_of(acc[q]));
  }
}

// Input columns iw in [lo, hi) whose output column iw * s + off lies in [0, ow).
inline void tap_range(int64_t off, int64_t s, int64_t w, int64_t ow, int64_t* lo, int64_t* hi) {
  // iw * s + off >= 0  <=>  iw >= ceil(-off / s);  iw * s + off <= ow - 1  <=>  iw <= floor((ow - 1 - off) / s)
  const int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  const int64_t bnum = ow - 1 - off;
  const int64_t b = bnum < 0 ? -1 : bnum / s;
  *lo = std::max<int64_t>(a, 0);
  *hi = std::min<int64_t>(b + 1, w);
  if (*hi < *lo) *hi = *lo;
}

}  // namespace

void ConvTranspose2d::run(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                          Kernel kernel) const {
  if (acc32_)
    run_acc<int32_t>(x, xs, ep, out, par, kernel);
  else
    run_acc<int64_t>(x, xs, ep, out, par, kernel);
}

template <typename Acc>
void ConvTranspose2d::run_acc(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                              Kernel kernel) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], h = xs[2], w = xs[3], oh = os[2], ow = os[3], m = os[1];
  const int64_t cg = c_ / a_.group;
  const int64_t khw = a_.kh * a_.kw;
  const int64_t pin = h * w, pout = oh * ow;
  if (n == 0) return;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(ep.kind));
  const int8_t** const rows = thread_scratch_as<const int8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(cg));
  int32_t* const sums =  // [(oc, i, j)][input pixel]
      thread_scratch_as<int32_t>(ScratchSlot::kConvTransposeSums, static_cast<size_t>(mg_ * khw * pin));
  Epilogue raw;
  raw.kind = gemm::OutKind::kRaw;
  // Each output sums at most cg * kh * kw products of magnitude <= 2^14.
  const int shift = std::is_same_v<Acc, int32_t> ? dw_nhwc_shift(ep, ep.bias, m, cg * khw) : -1;
  const size_t out_tasks = tasks_for(mg_, khw * pin);
  // int64 scratch either way (its slot's type); an int32 accumulator uses the first half of each task's part.
  int64_t* const acc_all = thread_scratch_as<int64_t>(ScratchSlot::kConvTransposeAcc, out_tasks * static_cast<size_t>(pout));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < a_.group; ++g) {
      const int8_t* xg = x + (b * c_ + g * cg) * pin;
      for (int64_t ic = 0; ic < cg; ++ic) rows[ic] = xg + ic * pin;
      gemm::gemm_cols_source(
          packed_[static_cast<size_t>(g)], pin,
          [&](int64_t q, uint8_t* scratch) {
            const int64_t p0 = q * gemm::kPanel;
            gemm::pack_panel(rows, cg, p0, std::min<int64_t>(gemm::kPanel, pin - p0), scratch);
            return static_cast<const uint8_t*>(scratch);
          },
          gemm::with_proven_x_max(raw, kernel, xg, 1, cg * pin, 0), sums, pin, par, kernel);
      // col2im: every (oc, i, j, input pixel) adds into output pixel (ih*s - p + i*d, iw*s - p + j*d); the input
      // columns that land inside the output are computed once per tap, so the inner loop has no test. With a
      // stride, the accumulator is kept as stride-phase planes (output (y, x) in plane (y % sh, x % sw) at
      // (y / sh, x / sw)): every tap then adds a contiguous run (vectorizable) instead of a strided one, and the
      // planes are interleaved back row by row just before the epilogue.
      const bool phased = std::is_same_v<Acc, int32_t> && (a_.sh > 1 || a_.sw > 1);
      const int64_t sh = phased ? a_.sh : 1, sw = phased ? a_.sw : 1;
      // Plane (ry, rx): ph(ry) rows of pw(rx) columns, starting at rows_before(ry) * ow + ph(ry) * cols_before(rx).
      auto ph = [&](int64_t ry) { return (oh - ry + sh - 1) / sh; };
      auto pw = [&](int64_t rx) { return (ow - rx + sw - 1) / sw; };
      auto plane_base = [&](int64_t ry, int64_t rx) {
        const int64_t rows_before = (oh / sh) * ry + std::min(oh % sh, ry);
        const int64_t cols_before = (ow / sw) * rx + std::min(ow % sw, rx);
        return rows_before * ow + ph(ry) * cols_before;
      };
      auto pmod = [](int64_t v, int64_t q) { return ((v % q) + q) % q; };
      par(out_tasks, [&](size_t t) {
        Acc* acc = reinterpret_cast<Acc*>(acc_all + t * static_cast<size_t>(pout));
        // The int64 scratch of this task holds 2 * pout int32: the phased path's row buffer is the second half.
        Acc* rowbuf = acc + pout;
        const int64_t o0 = mg_ * static_cast<int64_t>(t) / static_cast<int64_t>(out_tasks);
        const int64_t o1 = mg_ * static_cast<int64_t>(t + 1) / static_cast<int64_t>(out_tasks);
        for (int64_t oc = o0; oc < o1; ++oc) {
          std::fill(acc, acc + pout, Acc{0});
          for (int64_t i = 0; i < a_.kh; ++i) {
            for (int64_t j = 0; j < a_.kw; ++j) {
              const int32_t* s = sums + ((oc * a_.kh + i) * a_.kw + j) * pin;
              const int64_t xoff = j * a_.dw - a_.pl;
              int64_t iw0 = 0, iw1 = 0;
              tap_range(xoff, a_.sw, w, ow, &iw0, &iw1);
              if (iw0 >= iw1) continue;
              const int64_t yoff = i * a_.dh - a_.pt;
              if (phased) {
                const int64_t ry = pmod(yoff, sh), rx = pmod(xoff, sw);
                const int64_t fy = (yoff - ry) / sh, fx = (xoff - rx) / sw;
                const int64_t stride = pw(rx);
                Acc* plane = acc + plane_base(ry, rx) + fx;  // + py * stride + iw, inside for valid (y, x)
                for (int64_t ih = 0; ih < h; ++ih) {
                  const int64_t y = ih * a_.sh + yoff;
                  if (y < 0 || y >= oh) continue;
                  Acc* prow = plane + (ih + fy) * stride;
                  const int32_t* srow = s + ih * w;
                  for (int64_t iw = iw0; iw < iw1; ++iw) prow[iw] += static_cast<Acc>(srow[iw]);
                }
                continue;
              }
              for (int64_t ih = 0; ih < h; ++ih) {
                const int64_t y = ih * a_.sh + yoff;
                if (y < 0 || y >= oh) continue;
                Acc* arow = acc + y * ow;  // arow[iw * sw + xoff] for iw in [iw0, iw1) is inside the row
                const int32_t* srow = s + ih * w;
                if (a_.sw == 1) {
                  for (int64_t iw = iw0; iw < iw1; ++iw) arow[iw + xoff] += static_cast<Acc>(srow[iw]);
                } else {
                  const int64_t asw = a_.sw;
                  for (int64_t iw = iw0; iw < iw1; ++iw) arow[iw * asw + xoff] += static_cast<Acc>(srow[iw]);
                }
              }
            }
          }
          const int64_t ch = g * mg_ + oc;
          const int32_t bias = ep.bias ? ep.bias[ch] : 0;
          char* dst = static_cast<char*>(out) + (b * m + ch) * pout * es;
          if (!phased) {
            store_row<Acc>(ep, acc, pout, bias, dst, shift);
            continue;
          }
          for (int64_t y = 0; y < oh; ++y) {
            const int64_t ry = y % sh, py = y / sh;
            int64_t done = 0;  // leading output pixels already interleaved (stride 2: four pairs at a time)
#if defined(__SSE2__)
            if constexpr (std::is_same_v<Acc, int32_t>) {
              if (sw == 2) {
                const Acc* s0 = acc + plane_base(ry, 0) + py * pw(0);
                const Acc* s1 = acc + plane_base(ry, 1) + py * pw(1);
                const int64_t n1 = pw(1);  // <= pw(0)
                for (; done + 4 <= n1; done += 4) {
                  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + done));
                  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + done));
                  _mm_storeu_si128(reinterpret_cast<__m128i*>(rowbuf + 2 * done), _mm_unpacklo_epi32(a, c));
                  _mm_storeu_si128(reinterpret_cast<__m128i*>(rowbuf + 2 * done + 4), _mm_unpackhi_epi32(a, c));
                }
              }
            }
#endif
            for (int64_t rx = 0; rx < sw; ++rx) {
              const Acc* src = acc + plane_base(ry, rx) + py * pw(rx);
              const int64_t n_rx = pw(rx);
              for (int64_t px = done; px < n_rx; ++px) rowbuf[px * sw + rx] = src[px];
            }
            store_row<Acc>(ep, rowbuf, ow, bias, dst + y * ow * es, shift);
          }
        }
      });
    }
  }
}

}  // namespace ortquant::conv
