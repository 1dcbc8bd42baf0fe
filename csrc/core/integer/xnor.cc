// XNOR-popcount layers: see xnor.h.
#include "core/integer/xnor.h"

#include "core/error.h"
#include "core/integer/qlayer.h"
#include "core/integer/xnor_kernels.h"

namespace ortquant::integer {

bool all_unit_codes(const int8_t* w, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (w[i] != 1 && w[i] != -1) return false;
  return true;
}

XnorWeights pack_xnor_weights(const int8_t* w, int64_t n, int64_t groups, int64_t channels, int64_t taps) {
  XnorWeights p;
  p.n = n, p.groups = groups, p.rows = n / groups, p.channels = channels, p.taps = taps;
  p.words = (channels + 63) / 64;
  p.kwords = taps * p.words;
  p.blocks = (p.rows + kXnorRows - 1) / kXnorRows;
  // sizes checked by the caller (the weight's n * channels * taps bytes exist, channels * taps <= kMaxK)
  p.bits.assign(static_cast<size_t>(groups * p.blocks * p.kwords * kXnorRows), 0);
  p.pop.assign(static_cast<size_t>(n * taps), 0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t g = j / p.rows, r = j % p.rows, blk = g * p.blocks + r / kXnorRows;
    uint64_t* rb = p.bits.data() + blk * p.kwords * kXnorRows + r % kXnorRows;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        if (w[(j * channels + c) * taps + t] > 0) {
          rb[(t * p.words + c / 64) * kXnorRows] |= uint64_t{1} << (c % 64);
          ++p.pop[static_cast<size_t>(j * taps + t)];
        }
  }
  return p;
}

void xnor_pack_rows(const ActQuant& a, const float* x, int64_t rows, int64_t k, uint64_t* out) {
  select_isa(&scalar::xnor_pack_rows_isa, &avx2::xnor_pack_rows_isa, &avx512::xnor_pack_rows_isa)(
      x, rows, k, a.scale, a.zeropt, out);
}

void xnor_pack_pixels(const ActQuant& a, const float* x, int64_t channels, int64_t pixels, uint8_t* signs,
                      uint64_t* out) {
  select_isa(&scalar::xnor_pack_pixels_isa, &avx2::xnor_pack_pixels_isa, &avx512::xnor_pack_pixels_isa)(
      x, channels, pixels, a.scale, a.zeropt, signs, out);
}

void plane_pack_pixels(const int8_t* codes, int64_t channels, int64_t pixels, int plane, uint8_t* scratch,
                       uint64_t* out) {
  select_isa(&scalar::plane_pack_pixels_isa, &avx2::plane_pack_pixels_isa, &avx512::plane_pack_pixels_isa)(
      codes, channels, pixels, plane, scratch, out);
}

void plane_pack_rows(const int8_t* codes, int64_t rows, int64_t k, int plane, uint64_t* out) {
  select_isa(&scalar::plane_pack_rows_isa, &avx2::plane_pack_rows_isa, &avx512::plane_pack_rows_isa)(codes, rows, k,
                                                                                                     plane, out);
}

void plane_dot(const uint64_t* x, int planes, int64_t plane_stride, const XnorWeights& w, int64_t g, int32_t* out,
               int64_t out_stride) {
  const uint64_t* blocks = w.bits.data() + g * w.blocks * w.kwords * kXnorRows;
  select_isa(&scalar::plane_dot_isa, &avx2::plane_dot_isa, &avx512::plane_dot_isa)(x, planes, plane_stride, w.kwords,
                                                                                  blocks, w.rows, out, out_stride);
}

void xnor_dot(const uint64_t* x, int32_t base, const XnorWeights& w, int64_t g, int32_t* out, int64_t out_stride) {
  const uint64_t* blocks = w.bits.data() + g * w.blocks * w.kwords * kXnorRows;
  select_isa(&scalar::xnor_dot_isa, &avx2::xnor_dot_isa, &avx512::xnor_dot_isa)(x, w.kwords, blocks, w.rows, base,
                                                                              out, out_stride);
}

}  // namespace ortquant::integer
