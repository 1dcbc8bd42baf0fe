// QONNX Im2Col (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 7, decision 8.
// NHWC input (N, H, W, C) -> (N, OH, OW, KH*KW*C), per sample:
//   Y[n, i, j, (a*KW + b)*C + c] = Xpad[n, i*SH + a*DH, j*SW + b*DW, c]
// Xpad = X padded by pad_amount [top, left, bottom, right] with pad_value;
// OH = floor((H + top + bottom - DH*(KH-1) - 1) / SH) + 1, OW likewise.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace ortquant::qonnx {

struct Im2ColParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  float pad_value = 0.f;
};

struct Im2ColDims {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int64_t rows() const { return n * oh * ow; }                         // output pixels
  int64_t row_size(const Im2ColParams& p) const { return p.kernel_h * p.kernel_w * c; }
};

// Output dims of a 4-D NHWC input; throws Error when the dilated kernel does not fit the padded input.
Im2ColDims im2col_dims(const Shape& input, const Im2ColParams& p);

// Output rows [r0, r1) (row = (n, i, j) in row-major order).
void im2col_nhwc(const float* x, float* y, const Im2ColDims& d, const Im2ColParams& p, int64_t r0, int64_t r1);

}  // namespace ortquant::qonnx
