// Channels-last depthwise convolution (group == input channels == output channels): a task takes one image and
// one block of 16 channels, transposes those channels of the NCHW input into a zero-padded NHWC block
// [hp][wp][16] in its scratch (so no tap needs a bounds check and the 16 channels of a pixel are one 16-byte
// load), then for every output pixel multiply-adds the taps two at a time as int16 pairs (the bytes of taps t and
// t+1 interleaved and sign-extended, times the packed weight pairs: vpmaddwd, exact int32 sums), applies the GEMM
// epilogue to 16 channels at once and transposes tiles of 16 pixels x 16 channels back to NCHW.
// A large image runs in bands of output rows (DwNhwcArgs::band): a task unit is (image, block, band) and builds
// only the padded rows its band reads, so the block stays in L2 (a whole 256 x 256 block is 2 MiB of int16).
// With a sink (raw sums only), a unit's sums go to a buffer in its scratch and the sink gets them channel by
// channel while they are in cache, instead of an int32 output tensor (integer mode rescales them there).
// Per-ISA bodies in dwnhwc_<isa>.cc: scalar (the oracle, plain loops over the same packed data), AVX2 (every vector
// path; it computes 3 x 3 stride-2 layers without the block, from the NCHW rows: dw_rows_s2 below) and AVX-512 VNNI
// (the stride-1 row kernel's raw sums on vpdpbusd).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
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
  int64_t abs_sum_max = 0;  // max over channels of sum over taps of |w|
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
  // Output rows per task unit (dw_nhwc_band()): units are n * blocks * ceil(oh / band).
  int64_t band = 0;
  // ep->kind == kRaw only, optional: unit (img, block, band) hands the sums of each channel c of the block, output
  // rows [y0, y1), [y1 - y0][ow] int32 contiguous, to (*sink)(img, c, y0, y1, sums); `out` is not written. Called
  // on the task's thread: it must not throw and must be safe to call from several threads at once.
  const Conv2d::BandSink* sink = nullptr;
  // Raw sums on the AVX-512 VNNI body: its stride-1 row kernel sums in int32 (vpdpbusd), so dw_rows_s1 needs no
  // int16 bound. Set before dw_nhwc_band, only with ep->kind == kRaw and that kernel.
  bool exact32 = false;
};
// Output rows per unit for d (every field but band set): the whole image when its padded block is small, else
// the rows whose padded input rows and (with a sink) sums stay within about 128 KiB each; the 3 x 3 stride-2 row
// kernel (dw_rows_s2) keeps whole images. At least 1.
int64_t dw_nhwc_band(const DwNhwcArgs& d);
// Task units of d for n images.
inline int64_t dw_nhwc_units(const DwNhwcArgs& d, int64_t n) {
  return n * d.wts->blocks * ((d.oh + d.band - 1) / d.band);
}
// Unit t -> (image, block, first output row, end row).
struct DwUnit {
  int64_t img, blk, y0, y1;
};
inline DwUnit dw_nhwc_unit(const DwNhwcArgs& d, int64_t t) {
  const int64_t bands = (d.oh + d.band - 1) / d.band, per_img = d.wts->blocks * bands;
  const int64_t r = t % per_img, y0 = (r % bands) * d.band;
  return {t / per_img, r / bands, y0, std::min(d.oh, y0 + d.band)};
}
// Padded input rows a band of output rows [y0, y1) reads: [y0 * sh, (y1 - 1) * sh + (kh - 1) * dh + 1).
inline int64_t dw_band_in_rows(const DwNhwcArgs& d, int64_t rows) {
  return (rows - 1) * d.a.sh + (d.a.kh - 1) * d.a.dh + 1;
}
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
// The row kernel of the vector path for stride-1 layers (horizontal dilation 1, at least 16 output columns, at most
// 64 taps) whose sums provably fit int16: every |activation| <= a (dw_rows_s1_abs_max: x_max when the activations
// are promised in [0, x_max] (Epilogue::x_max, integer mode's non-negative codes), else 128, true of every int8) with
// a * max_c sum_t |w[c][t]| <= 32767, so every partial sum fits too. Per channel the band's input rows are widened
// (sign-extended) once into a zero-padded int16 plane; each 16 output columns of a row are then kh * kw (load,
// vpmullw by the broadcast weight, vpaddw), exact, widened to int32 for the epilogue or the sink. No channels-last
// block and no transposes. (With exact32 and non-negative activations, the AVX-512 VNNI body's int32 sums,
// dw_rows_s1_vnni: no such bound.)
inline bool dw_rows_s1_shape(const DwNhwcArgs& d) {
  return d.a.sh == 1 && d.a.sw == 1 && d.a.dw == 1 && d.ow >= 16 && d.wts->taps <= 64 && d.ep != nullptr;
}
inline bool dw_rows_s1_nonneg(const DwNhwcArgs& d) { return d.ep->x_max >= 0 && d.ep->x_max <= 127; }
inline int64_t dw_rows_s1_abs_max(const DwNhwcArgs& d) { return dw_rows_s1_nonneg(d) ? d.ep->x_max : 128; }
// The AVX-512 VNNI body's row kernel: vpdpbusd takes the activations as unsigned bytes, so they must be promised
// non-negative.
inline bool dw_rows_s1_vnni(const DwNhwcArgs& d) {
  return dw_rows_s1_shape(d) && d.exact32 && dw_rows_s1_nonneg(d);
}
inline bool dw_rows_s1(const DwNhwcArgs& d) {
  return dw_rows_s1_shape(d) &&
         (dw_rows_s1_vnni(d) || dw_rows_s1_abs_max(d) * d.wts->abs_sum_max <= 32767);
}
// Its padded row stride in int16 elements: the vectors read up to column round16(ow) + kw - 2 (the last 16 columns
// of a row are computed at ow - 16, overlapping); the widening writes columns [pl, pl + w).
inline int64_t dw_rows_s1_stride(const DwNhwcArgs& d) {
  const int64_t need = std::max((d.ow + 15) / 16 * 16 + d.a.kw - 1, d.wp);
  return (need + 15) / 16 * 16;
}
// The AVX-512 VNNI body of the same kernel (dwnhwc_avx512vnni.cc, raw sums only) reads quad rows instead: per padded
// input row and group of 4 taps of a kernel row (dw_rows_s1_groups), dw_rows_s1_quads int32 lanes (the output
// columns rounded up to 16), built straight from the input row (masked loads at its edges).
inline int64_t dw_rows_s1_groups(const DwNhwcArgs& d) { return (d.a.kw + 3) / 4; }
inline int64_t dw_rows_s1_quads(const DwNhwcArgs& d) { return (d.ow + 15) / 16 * 16; }
// Its padded row stride in bytes (planes of hp such rows): the vectors read up to byte 2 * round8(ow) + 1 of a
// padded row; the copy writes bytes [pl, pl + w).
inline int64_t dw_rows_stride(const DwNhwcArgs& d) {
  const int64_t need = std::max(2 * ((d.ow + 7) / 8 * 8) + 2, d.a.pl + d.w);
  return (need + 31) / 32 * 32;
}
// The shift of d (see DwNhwcArgs::shift) for epilogue ep and bias (c values or null), or -1.
int dw_nhwc_shift(const gemm::Epilogue& ep, const int32_t* bias, int64_t c, int64_t taps);
// Bytes of scratch one task needs (the padded rows of a band, int16 on the AVX2 path, a 16 x 16 output tile and,
// with a sink, the sums of a band; band set); -1 when it would overflow.
int64_t dw_nhwc_scratch(const DwNhwcArgs& d);
// The sink's buffer in a task's scratch: its byte offset (after the block and the tile) and int32 count.
int64_t dw_nhwc_sums_offset(const DwNhwcArgs& d);
// Units [t0, t1) (dw_nhwc_unit); scratch: dw_nhwc_scratch() bytes, 64-aligned.
void dw_nhwc(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch, gemm::Kernel kernel);

namespace scalar {
void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch);
}
namespace avx2 {
void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch);
}
namespace avx512vnni {  // the stride-1 row kernel with raw sums on vpdpbusd; everything else the AVX2 body
void dw_nhwc_tasks(const DwNhwcArgs& d, int64_t t0, int64_t t1, int8_t* scratch);
}

}  // namespace ortquant::conv
