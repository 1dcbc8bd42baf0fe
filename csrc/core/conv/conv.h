// Convolutions of the linger ops (Conv2dInt, Conv1dInt as a 1-row Conv2d, ConvTranspose2dInt) on the int8 GEMM
// engine: NCHW, zero padding in the integer domain, exact int32/int64 sums, the GEMM epilogue per output channel.
//   - general groups: implicit im2col straight into the engine's packed pixel panels, then gemm_cols (the
//     output comes out NCHW);
//   - depthwise (one input channel per group): a direct kernel (GEMM with K = kh*kw is a poor fit);
//   - transposed convolution: gemm_cols to exact int32 column sums, then col2im (int64) and the epilogue.
#pragma once
#include <cstdint>
#include <vector>

#include "core/gemm/gemm.h"
#include "core/shape.h"

namespace ortquant::conv {

struct ConvAttrs {
  int64_t kh = 1, kw = 1;            // kernel
  int64_t sh = 1, sw = 1;            // strides
  int64_t dh = 1, dw = 1;            // dilations
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right (ONNX order [t, l, b, r])
  int64_t oph = 0, opw = 0;          // output_padding (transposed convolution only)
  int64_t group = 1;
};

// Throws Error for non-positive kernel/stride/dilation/group or negative pads (and bad output_padding when
// `transposed`: it must be < max(stride, dilation), as in torch).
void validate_attrs(const ConvAttrs& a, bool transposed);

// Output size of one spatial dim of a convolution; throws Error when the (padded) input is smaller than the
// dilated kernel. `what` names the dim in the message.
int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char* what);
// Output size of one spatial dim of a transposed convolution; throws Error when it is not positive.
int64_t conv_transpose_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t op,
                               const char* what);

// A convolution with its weights prepared (packed per group, or kept for the depthwise kernel).
// Weights [m][c/group][kh][kw]; m must be a multiple of group.
class Conv2d {
 public:
  Conv2d(const int8_t* w, int64_t m, int64_t cg, const ConvAttrs& a);
  // [n, m, oh, ow] for an input [n, c, h, w]; throws Error naming the mismatch (channels vs. group * c/group,
  // input smaller than the kernel).
  Shape output_shape(const Shape& x) const;
  // x [n, c, h, w] -> out [n, m, oh, ow] of ep.kind (ep.bias: m values or null).
  void run(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const;
  bool depthwise() const { return depthwise_; }

 private:
  ConvAttrs a_;
  int64_t m_, cg_;
  bool depthwise_;
  std::vector<gemm::PackedWeights> packed_;  // per group (general path)
  std::vector<int8_t> w_;                    // raw weights (depthwise path)
};

// Transposed convolution with prepared weights [c][m/group][kh][kw] (c input channels, a multiple of group).
class ConvTranspose2d {
 public:
  ConvTranspose2d(const int8_t* w, int64_t c, int64_t mg, const ConvAttrs& a);
  Shape output_shape(const Shape& x) const;
  void run(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const;

 private:
  ConvAttrs a_;
  int64_t c_, mg_;
  std::vector<gemm::PackedWeights> packed_;  // per group: rows (oc, i, j), k = input channel of the group
};

// Depthwise kernels per ISA (depthwise_<isa>.cc); planes [p0, p1) of n*m output planes.
struct DepthwiseArgs {
  const int8_t* x;
  const int8_t* w;  // [m][kh][kw]
  int64_t c, h, w_in, m, oh, ow;
  ConvAttrs a;
  const gemm::Epilogue* ep;
  void* out;
  const int64_t* col_lo;  // per kernel column j: output columns [col_lo[j], col_hi[j]) read inside the input
  const int64_t* col_hi;
};
// acc: ow int32 of scratch.
void depthwise(const DepthwiseArgs& d, int64_t p0, int64_t p1, int32_t* acc, gemm::Kernel kernel);

// Output columns [lo[j], hi[j]) whose input column ow*sw + j*dw - pl lies in [0, w) (the rest read padding).
void valid_columns(const ConvAttrs& a, int64_t w, int64_t ow, std::vector<int64_t>* lo, std::vector<int64_t>* hi);

}  // namespace ortquant::conv
