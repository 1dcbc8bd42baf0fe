// Depthwise convolution for the avx512 path (flags chosen by this file's name in CMakeLists.txt). Column strides
// 1 and 2: 16 output columns per zmm straight from the input (stride 2: the even bytes of a 32-byte load), taps
// that fall in the padding masked out of the load (masked loads do not fault), then the zmm epilogue. Other
// strides use the generic phase-plane loops of depthwise_impl.inc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 intrinsic headers (see kernel_avx512vnni.cc)
#include "core/simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/conv/depthwise_kernels.h"

namespace ortquant::conv::avx512 {

#define ORTQUANT_DEPTHWISE_ENTRY depthwise_planes_generic
#include "core/conv/depthwise_impl.inc"
#undef ORTQUANT_DEPTHWISE_ENTRY

namespace {

using gemm::Epilogue;
using gemm::OutKind;
#include "core/gemm/epilogue_avx512.inc"

template <OutKind K, int S>
void plane(const DepthwiseArgs& d, const int64_t* lo, const int64_t* hi, const int8_t* xp, const int8_t* wp,
           int32_t bias, char* op) {
  const ConvAttrs& a = d.a;
  const int64_t oh_n = d.g.oh, ow_n = d.g.ow, es = static_cast<int64_t>(gemm::out_elem_size(K));
  const Epilogue& ep = *d.ep;
  const Consts cst(ep);
  const bool divide = ep.fdiv != 0.0;
  const __m512d b = _mm512_set1_pd(static_cast<double>(bias));
  const int64_t taps = a.kh * a.kw;
  __m512i wv[64];
  for (int64_t t = 0; t < taps && t < 64; ++t) wv[t] = _mm512_set1_epi32(wp[t]);
  for (int64_t o0 = 0; o0 < ow_n; o0 += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, ow_n - o0));
    // Per kernel column: the lanes whose input column lies inside the row (the others load nothing = 0;
    // masked loads do not fault), as a byte mask of the load.
    uint32_t bytes[64];
    for (int64_t j = 0; j < a.kw; ++j) {
      const int64_t l0 = std::max<int64_t>(lo[j] - o0, 0), l1 = std::min<int64_t>(hi[j] - o0, n);
      const uint32_t lanes = l1 <= l0 ? 0u : ((1u << l1) - 1u) & ~((1u << l0) - 1u);
      bytes[j] = S == 1 ? lanes : _pdep_u32(lanes, 0x55555555u);
    }
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t i = 0; i < a.kh; ++i) {
        const int64_t ih = oh * a.sh - a.pt + i * a.dh;
        if (ih < 0 || ih >= d.h) continue;  // zero padding rows
        const int8_t* row = xp + ih * d.w_in + o0 * S - a.pl;
        for (int64_t j = 0; j < a.kw; ++j) {
          const int8_t* src = row + j * a.dw;
          __m512i v;
          if constexpr (S == 1) {
            v = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(static_cast<__mmask16>(bytes[j]), src));
          } else {
            // vpmovwb keeps the low (even) byte of each 16-bit pair.
            v = _mm512_cvtepi8_epi32(_mm256_cvtepi16_epi8(_mm256_maskz_loadu_epi8(bytes[j], src)));
          }
          acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, wv[i * a.kw + j]));
        }
      }
      store16<K>(cst, divide, acc, b, b, op + (oh * ow_n + o0) * es, lane_mask(n));
    }
  }
}

template <OutKind K>
void planes(const DepthwiseArgs& d, int64_t p0, int64_t p1) {
  const ConvAttrs& a = d.a;
  // Output columns [lo[j], hi[j]) whose input column ow*sw - pl + j*dw lies in [0, w).
  int64_t lo[64], hi[64];
  for (int64_t j = 0; j < a.kw; ++j) {
    const int64_t off = j * a.dw - a.pl;
    const int64_t l = off >= 0 ? 0 : (-off + a.sw - 1) / a.sw;
    const int64_t e = d.w_in - 1 - off >= 0 ? (d.w_in - 1 - off) / a.sw + 1 : 0;
    lo[j] = std::min(l, d.g.ow);
    hi[j] = std::max(lo[j], std::min(e, d.g.ow));
  }
  const int64_t mult = d.m / d.a.group;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(K));
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / d.m, oc = p % d.m;
    const int8_t* xp = d.x + (n * d.c + oc / mult) * d.h * d.w_in;
    const int8_t* wp = d.w + oc * d.a.kh * d.a.kw;
    const int32_t bias = d.ep->bias ? d.ep->bias[oc] : 0;
    char* op = static_cast<char*>(d.out) + p * d.g.oh * d.g.ow * es;
    if (d.a.sw == 1) plane<K, 1>(d, lo, hi, xp, wp, bias, op);
    else plane<K, 2>(d, lo, hi, xp, wp, bias, op);
  }
}

}  // namespace

void depthwise_planes(const DepthwiseArgs& d, int64_t p0, int64_t p1, int8_t* phases, int32_t* acc) {
  if (d.a.sw > 2 || d.a.kw > 64 || d.a.kh * d.a.kw > 64) {
    depthwise_planes_generic(d, p0, p1, phases, acc);
    return;
  }
  switch (d.ep->kind) {
    case OutKind::kInt8: planes<OutKind::kInt8>(d, p0, p1); break;
    case OutKind::kInt16: planes<OutKind::kInt16>(d, p0, p1); break;
    case OutKind::kInt32: planes<OutKind::kInt32>(d, p0, p1); break;
    case OutKind::kFloat: planes<OutKind::kFloat>(d, p0, p1); break;
    case OutKind::kRaw: planes<OutKind::kRaw>(d, p0, p1); break;
  }
}

}  // namespace ortquant::conv::avx512
