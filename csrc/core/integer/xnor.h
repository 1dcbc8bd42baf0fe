// Binary-weight integer-mode layers on bit kernels: a QConv or QGemm whose weight codes are all -1 or
// +1 (BipolarQuant weights, FINN's 1W*A layers) computes its exact sums from bits instead of int8 multiply-adds:
//   - XNOR-popcount when the activation quantizer is bipolar (BipolarQuant, or signed 1-bit Quant: 1W1A);
//   - bit-serial AND-popcount when the activation's stored codes c (QConv/QGemm's nonneg_codes: c = a - offset,
//     offset = min(a, 0)) are in [0, 3]: 1- and 2-bit activations, signed (e.g. ternary -1, 0, 1) or not (1W2A).
//     Per bit plane C_b of the codes, sum_k c_b,k w_k = 2 popcount(C_b AND W) - popcount(C_b), weighted by 2^b;
//     the layer adds offset * sum_k w_k (its corr) as on the int8 engine. Padding is the code -offset (a = 0),
//     gathered as that code's planes.
//
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

// Bit plane `plane` of int8 activation codes (all >= 0) as xnor_pack_pixels / xnor_pack_rows lay the bits out.
void plane_pack_pixels(const int8_t* codes, int64_t channels, int64_t pixels, int plane, uint8_t* scratch,
                       uint64_t* out);
void plane_pack_rows(const int8_t* codes, int64_t rows, int64_t k, int plane, uint64_t* out);

// Bit-serial: out[r * out_stride] = sum over b < planes of 2^b * (2 popcount(X_b AND row r) - popcount(X_b)), the
// planes X_b = x + b * plane_stride (kwords words each), against the rows of group g.
void plane_dot(const uint64_t* x, int planes, int64_t plane_stride, const XnorWeights& w, int64_t g, int32_t* out,
               int64_t out_stride);

// One output pixel (or GEMM row) whose kwords activation words are gathered in x, against the rows of group g:
// out[r * out_stride] = base - 2 * popcount(x XOR the bits of the group's row r), r < w.rows, with base =
// n_valid_taps * channels. The caller checks taps * channels <= gemm::kMaxK and corrects padded taps.
void xnor_dot(const uint64_t* x, int32_t base, const XnorWeights& w, int64_t g, int32_t* out, int64_t out_stride);

}  // namespace ortquant::integer
