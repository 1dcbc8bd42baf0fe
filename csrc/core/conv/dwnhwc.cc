#include "core/conv/dwnhwc.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace ortquant::conv {

DwNhwcWeights pack_dw_nhwc(const int8_t* w, int64_t c, int64_t kh, int64_t kw) {
  DwNhwcWeights p;
  p.c = c;
  p.taps = kh * kw;
  p.pairs = (p.taps + 1) / 2;
  p.blocks = (c + kDwBlock - 1) / kDwBlock;
  p.data.assign(static_cast<size_t>(p.blocks * p.pairs * kDwBlock * 2), 0);
  for (int64_t ch = 0; ch < c; ++ch) {
    int16_t* blk = p.data.data() + (ch / kDwBlock) * p.pairs * kDwBlock * 2;
    int64_t abs_sum = 0;
    for (int64_t t = 0; t < p.taps; ++t) {
      blk[((t / 2) * kDwBlock + ch % kDwBlock) * 2 + t % 2] = w[ch * p.taps + t];
      abs_sum += std::abs(static_cast<int64_t>(w[ch * p.taps + t]));
    }
    p.abs_sum_max = std::max(p.abs_sum_max, abs_sum);
  }
  // Slot i of the lane order holds channel kLane[i].
  static constexpr int kLane[kDwBlock] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  p.lanes.assign(p.data.size(), 0);
  for (int64_t q = 0; q < p.blocks * p.pairs; ++q)
    for (int i = 0; i < kDwBlock; ++i)
      for (int j = 0; j < 2; ++j) p.lanes[(q * kDwBlock + i) * 2 + j] = p.data[(q * kDwBlock + kLane[i]) * 2 + j];
  return p;
}

namespace {
// dw_nhwc_band(): images whose int16 block is at most kDwWholeBytes run whole; others in bands whose padded rows
// (and sink sums) stay within about kDwBandBytes each. Measured on Zen 3 (BENCHMARKS.md, depthwise 3 x 3 at 256 x 256).
constexpr int64_t kDwWholeBytes = 256 * 1024;
constexpr int64_t kDwBandBytes = 128 * 1024;
constexpr int64_t kLimit = int64_t{1} << 40;

int64_t round64(int64_t v) { return (v + 63) / 64 * 64; }

// Bytes of the int16 block of a band of `rows` output rows (-1 on overflow); 0 for the row kernel.
int64_t block_bytes(const DwNhwcArgs& d, int64_t rows) {
  int64_t pix = 0, bytes = 0;
  if (__builtin_mul_overflow(dw_band_in_rows(d, rows), d.wp, &pix) ||
      __builtin_mul_overflow(pix, int64_t{kDwBlock} * 2, &bytes) || bytes > kLimit)
    return -1;
  return bytes;
}
}  // namespace

int64_t dw_nhwc_band(const DwNhwcArgs& d) {
  if (dw_rows_s2(d)) return std::max<int64_t>(d.oh, 1);
  const int64_t whole = block_bytes(d, d.oh);
  int64_t rows = d.oh;
  if (whole < 0 || whole > kDwWholeBytes) {
    int64_t row_bytes = 0;  // one padded row of the block
    if (__builtin_mul_overflow(d.wp, int64_t{kDwBlock} * 2, &row_bytes) || row_bytes < 1) return 1;
    const int64_t halo = (d.a.kh - 1) * d.a.dh + 1;
    rows = (kDwBandBytes / row_bytes - halo) / d.a.sh + 1;
  }
  if (d.sink != nullptr) rows = std::min(rows, kDwBandBytes / (kDwBlock * 4 * std::max<int64_t>(d.ow, 1)));
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(d.oh, 1));
}

int64_t dw_nhwc_sums_offset(const DwNhwcArgs& d) {
  // The block and the tile (the scalar oracle's int8 block fits in the int16 one's bytes).
  const int64_t b = block_bytes(d, d.band);
  if (b < 0) return -1;
  int64_t off = round64(b) + round64(kDwBlock * kDwBlock * 4);
  if (dw_rows_s2(d)) {  // the row kernel: two planes of hp padded rows
    int64_t rows = 0;
    if (__builtin_mul_overflow(2 * d.hp, dw_rows_stride(d), &rows) || rows > kLimit) return -1;
    off = std::max(off, round64(rows));
  } else if (dw_rows_s1(d)) {  // the stride-1 row kernel: one int16 plane of the band's padded rows, or (AVX-512
                               // VNNI) their quad rows
    const int64_t in_rows = dw_band_in_rows(d, d.band);
    int64_t plane = 0, quads = 0;
    if (__builtin_mul_overflow(in_rows, dw_rows_s1_stride(d) * 2, &plane) || plane > kLimit) return -1;
    if (__builtin_mul_overflow(in_rows, dw_rows_s1_groups(d) * dw_rows_s1_quads(d) * 4, &quads) || quads > kLimit)
      return -1;
    off = std::max({off, round64(plane), round64(quads)});
  }
  return off;
}

int64_t dw_nhwc_scratch(const DwNhwcArgs& d) {
  if (d.band < 1) return -1;
  const int64_t off = dw_nhwc_sums_offset(d);
  if (off < 0) return -1;
  if (d.sink == nullptr) return off;
  // The sink's sums: a band of 16 channels, or one channel's plane for the row kernel.
  int64_t sums = 0;
  if (__builtin_mul_overflow(dw_rows_s2(d) ? d.oh : kDwBlock * d.band, d.ow, &sums) || sums > kLimit) return -1;
  return off + round64(sums * 4);
}

int dw_nhwc_shift(const gemm::Epilogue& ep, const int32_t* bias, int64_t c, int64_t taps) {
  return gemm::exact_shift(ep, bias, c, taps);
}

void dw_nhwc(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch, gemm::Kernel kernel) {
  switch (gemm::resolve_kernel(kernel)) {
    case gemm::Kernel::kScalar: scalar::dw_nhwc_tasks(d, t0, t1, scratch); break;
    case gemm::Kernel::kAvx512Vnni: avx512vnni::dw_nhwc_tasks(d, t0, t1, scratch); break;
    default: avx2::dw_nhwc_tasks(d, t0, t1, scratch); break;  // AVX2 code runs on every other vector path
  }
}

}  // namespace ortquant::conv
