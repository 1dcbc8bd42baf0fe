// 1-bit integer-mode layers on XNOR-popcount (issue 10): a QConv or QGemm whose activation quantizer is bipolar
// (BipolarQuant, or signed 1-bit Quant) and whose weight codes are all -1 or +1 (BipolarQuant weights) computes
// its exact sums from bits instead of int8 multiply-adds.
//
// A value +1 is the bit 1 and -1 the bit 0; for n pairs of such values, sum a_k * w_k = n - 2 * popcount(a XOR w).
// Activations are packed channel-contiguous: one run of `words` = ceil(channels / 64) 64-bit words per pixel (or
// per GEMM row), the unused high bits 0 in both operands so they never count. A convolution gathers each output
// pixel's taps into one contiguous run (as the weight rows are laid out). A tap that falls in the padding
// contributes 0 (as the engine's padding code does): its words are gathered as 0, which counts popcount(w) for
// that tap, and the layer takes those counts (precomputed per weight row and tap) back out; n counts the valid
// taps only. The sums are the same exact integers the int8 engine computes, so the layer's output bits do not
// change.
#pragma once
#include <cstdint>
#include <vector>

namespace ortquant::integer {

struct ActQuant;  // core/integer/qlayer.h

// True when every one of the `count` codes is -1 or +1.
bool all_unit_codes(const int8_t* w, int64_t count);

// The weight bits of row j, tap t, channel c of the codes w[(j * channels + c) * taps + t] (the OIHW order of a
// convolution's weight, taps = kh * kw; a GEMM's [n][k] weight is taps = 1, channels = k), in blocks of
// kXnorRows rows of one group, word-interleaved so the kernel walks one pointer: block b of group g holds the
// group's rows b * kXnorRows + r at bits[((g * blocks + b) * kwords + i) * kXnorRows + r], for the kwords =
// taps * words words of a row (word i belongs to tap i / words); rows past the group's end are 0 bits, computed
// and dropped. pop[j * taps + t]: the number of 1 bits (codes +1) of row j's tap t.
constexpr int64_t kXnorRows = 8;
struct XnorWeights {
  int64_t n = 0, groups = 1, rows = 0, channels = 0, taps = 0, words = 0, kwords = 0, blocks = 0;
  std::vector<uint64_t> bits;
  std::vector<int32_t> pop;
};
// n rows in `groups` groups of n / groups rows (the caller checks the division).
XnorWeights pack_xnor_weights(const int8_t* w, int64_t n, int64_t groups, int64_t channels, int64_t taps);

// Activation bits of a bipolar quantizer `a` (bit = x / s + z >= 0, NaN -> 0, exactly as the int8 path's code).
//   rows:   x [rows][k] -> out [rows][ceil(k / 64)]
//   pixels: x [channels][pixels] (one group of an NCHW image) -> out [pixels][ceil(channels / 64)]; `signs` is
//           caller scratch of channels * pixels bytes.
void xnor_pack_rows(const ActQuant& a, const float* x, int64_t rows, int64_t k, uint64_t* out);
void xnor_pack_pixels(const ActQuant& a, const float* x, int64_t channels, int64_t pixels, uint8_t* signs,
                      uint64_t* out);

// One output pixel (or GEMM row) whose kwords activation words are gathered in x, against the rows of group g:
// out[r * out_stride] = base - 2 * popcount(x XOR the bits of the group's row r), r < w.rows, with base =
// n_valid_taps * channels. The caller checks taps * channels <= gemm::kMaxK and corrects padded taps.
void xnor_dot(const uint64_t* x, int32_t base, const XnorWeights& w, int64_t g, int32_t* out, int64_t out_stride);

}  // namespace ortquant::integer
