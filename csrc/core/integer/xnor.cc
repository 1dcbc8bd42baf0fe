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

XnorWeights pack_xnor_weights(const int8_t* w, int64_t n, int64_t channels, int64_t taps) {
  XnorWeights p;
  p.n = n, p.channels = channels, p.taps = taps;
  p.words = (channels + 63) / 64;
  p.bits.assign(static_cast<size_t>(n * taps * p.words), 0);  // sizes checked by the caller (weight bytes exist)
  p.pop.assign(static_cast<size_t>(n * taps), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        if (w[(j * channels + c) * taps + t] > 0) {
          p.bits[static_cast<size_t>((j * taps + t) * p.words + c / 64)] |= uint64_t{1} << (c % 64);
          ++p.pop[static_cast<size_t>(j * taps + t)];
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

void xnor_dot(const uint64_t* x, int32_t base, const XnorWeights& w, int64_t j0, int64_t j1, int32_t* out,
              int64_t out_stride) {
  select_isa(&scalar::xnor_dot_isa, &avx2::xnor_dot_isa, &avx512::xnor_dot_isa)(x, w.taps * w.words, w.bits.data(),
                                                                              j0, j1, base, out, out_stride);
}

}  // namespace ortquant::integer
