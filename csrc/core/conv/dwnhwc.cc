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
    for (int64_t t = 0; t < p.taps; ++t) blk[((t / 2) * kDwBlock + ch % kDwBlock) * 2 + t % 2] = w[ch * p.taps + t];
  }
  // Slot i of the lane order holds channel kLane[i].
  static constexpr int kLane[kDwBlock] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  p.lanes.assign(p.data.size(), 0);
  for (int64_t q = 0; q < p.blocks * p.pairs; ++q)
    for (int i = 0; i < kDwBlock; ++i)
      for (int j = 0; j < 2; ++j) p.lanes[(q * kDwBlock + i) * 2 + j] = p.data[(q * kDwBlock + kLane[i]) * 2 + j];
  return p;
}

int64_t dw_nhwc_scratch(const DwNhwcArgs& d) {
  int64_t pix = 0, bytes = 0;
  if (__builtin_mul_overflow(d.hp, d.wp, &pix) || __builtin_mul_overflow(pix, int64_t{kDwBlock} * 2, &bytes) ||
      bytes > (int64_t{1} << 40))
    return -1;
  bytes = (bytes + 63) / 64 * 64 + kDwBlock * kDwBlock * 4;
  if (dw_rows_s2(d)) {  // the row kernel: two planes of hp padded rows
    int64_t rows = 0;
    if (__builtin_mul_overflow(2 * d.hp, dw_rows_stride(d), &rows) || rows > (int64_t{1} << 40)) return -1;
    bytes = std::max(bytes, (rows + 63) / 64 * 64);
  }
  return bytes;
}

int dw_nhwc_shift(const gemm::Epilogue& ep, const int32_t* bias, int64_t c, int64_t taps) {
  return gemm::exact_shift(ep, bias, c, taps);
}

void dw_nhwc(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch, gemm::Kernel kernel) {
  switch (gemm::resolve_kernel(kernel)) {
    case gemm::Kernel::kScalar: scalar::dw_nhwc_tasks(d, t0, t1, scratch); break;
    default: avx2::dw_nhwc_tasks(d, t0, t1, scratch); break;  // AVX2 code runs on every vector path
  }
}

}  // namespace ortquant::conv
