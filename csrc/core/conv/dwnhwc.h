// Channels-last depthwise convolution (group == input channels == output channels): a task takes one image and
// one block of 16 channels, transposes those channels of the NCHW input into a zero-padded NHWC block
// [hp][wp][16] in its scratch (so no tap needs a bounds check and the 16 channels of a pixel are one 16-byte
// load), then for every output pixel multiply-adds the taps two at a time as int16 pairs (the bytes of taps t and
// t+1 interleaved and sign-extended, times the packed weight pairs: vpmaddwd, exact int32 sums), applies the GEMM
// epilogue to 16 channels at once and transposes tiles of 16 pixels x 16 channels back to NCHW.
// Per-ISA bodies in dwnhwc_<isa>.cc: scalar (the oracle, plain loops over the same packed data) and AVX2; the AVX2
// path computes 3 x 3 stride-2 layers without the block, from the NCHW rows (dw_rows_s2 below).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/conv/conv.h"

namespace ortquant::conv {

constexpr int kDwBlock = 16;  // channels per block

// Weights [c][kh][kw] packed per block of 16 channels as int16 pairs of consecutive taps:
// [block][pair q][16 channels][2] (taps 2q and 2q+1; a missing last tap and missing channels are 0).
// `lanes`: the same values with each pair's 16 channels in the order 0-3, 8-11, 4-7, 12-15, the channel order of
// vpunpck{l,h}wd on a ymm of 16 int16 channels (the AVX2 kernel's accumulators).
struct DwNhwcWeights {
  int64_t c = 0, taps = 0, pairs = 0, blocks = 0;
  std::vector<int16_t> data, lanes;
  const int16_t* block(int64_t b) const { return data.data() + b * pairs * kDwBlock * 2; }
  const int16_t* block_lanes(int64_t b) const { return lanes.data() + b * pairs * kDwBlock * 2; }
};
DwNhwcWeights pack_dw_nhwc(const int8_t* w, int64_t c, int64_t kh, int64_t kw);

struct DwNhwcArgs {
  const int8_t* x;  // [n][c][h][w]
  int64_t c, h, w;
  ConvAttrs a;
  int64_t oh, ow;
  int64_t hp, wp;              // padded input: h + pt + pb, w + pl + pr
  const DwNhwcWeights* wts;
  const int64_t* tap_off;      // per tap (2 * pairs entries, the pad tap repeats the last): byte offset in a block
  const gemm::Epilogue* ep;
  void* out;                   // [n][c][oh][ow]
  // Integer kinds whose ratio is 2^-shift (0 <= shift <= 30) and whose sums plus bias plus rounding cannot leave
  // int32: floor((sum + bias) * 2^-shift + 0.5) = (sum + bias + half) >> shift exactly, so the vector paths may
  // requantize in int32 (shift = -1: the float64 epilogue). Set by dw_nhwc_shift().
  int shift = -1;
};
// The row kernel of the vector path for 3 x 3 (or 3 x 4) kernels with stride 2 and dilation 1 and at least 8
// output columns: the input stays NCHW, no channels-last block and no transposes. Per channel the input rows are
// copied into zero-padded rows; the 16 bytes at padded column 2 ox0 + 2 j, sign-extended, are then the int16 pairs
// (2 ox + 2 j, 2 ox + 2 j + 1) of the 8 output columns ox0 .. ox0 + 7, one pair per 32-bit lane, so each kernel row
// is 2 vpmaddwd per 8 output columns against broadcast weight pairs (the second (w, 0) for kw = 3), and the 8 sums
// leave through the 8-lane epilogue straight into the output row. (Other kernels with stride 2 computed this way, a
// row at a time, measured slower than the block on 5 x 5 layers: they keep the block.)
inline bool dw_rows_s2(const DwNhwcArgs& d) {
  return d.a.kh == 3 && (d.a.kw == 3 || d.a.kw == 4) && d.a.sh == 2 && d.a.sw == 2 && d.a.dh == 1 && d.a.dw == 1 &&
         d.ow >= 8;
}
// Its padded row stride in bytes (planes of hp such rows): the vectors read up to byte 2 * round8(ow) + 1 of a
// padded row; the copy writes bytes [pl, pl + w).
inline int64_t dw_rows_stride(const DwNhwcArgs& d) {
  const int64_t need = std::max(2 * ((d.ow + 7) / 8 * 8) + 2, d.a.pl + d.w);
  return (need + 31) / 32 * 32;
}
// The shift of d (see DwNhwcArgs::shift) for epilogue ep and bias (c values or null), or -1.
int dw_nhwc_shift(const gemm::Epilogue& ep, const int32_t* bias, int64_t c, int64_t taps);
// Bytes of scratch one task needs (the padded block, int16 on the AVX2 path, and a 16 x 16 output tile); -1 when it
// would overflow.
int64_t dw_nhwc_scratch(const DwNhwcArgs& d);
// Tasks [t0, t1) of n * blocks (task = image * blocks + block); scratch: dw_nhwc_scratch() bytes, 64-aligned.
void dw_nhwc(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch, gemm::Kernel kernel);

namespace scalar {
void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch);
}
namespace avx2 {
void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch);
}

}  // namespace ortquant::conv
