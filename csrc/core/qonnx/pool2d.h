// Window geometry shared by the QONNX pooling ops (MaxPoolNHWC, QuantAvgPool2d).
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace ortquant::qonnx {

struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool ceil_mode = false;
};

// Output length along one axis, as onnxruntime's MaxPool computes it: floor((in + pads - k) / s) + 1, or with
// ceil_mode the ceiling, minus a last window that would start in the end padding. Throws Error naming `axis` when
// the kernel does not fit the padded input.
int64_t pool_output_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, bool ceil_mode,
                        const char* axis);

struct Pool2dDims {
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
};

// Dims of a 4-D input; channels_last: (N, H, W, C), else (N, C, H, W).
Pool2dDims pool2d_dims(const Shape& input, const Pool2dParams& p, bool channels_last);

// The input rows [begin, end) (clipped to [0, size)) covered by output index o along one axis.
inline void pool_window(int64_t o, int64_t stride, int64_t pad_begin, int64_t kernel, int64_t size, int64_t* begin,
                        int64_t* end) {
  const int64_t b = o * stride - pad_begin;
  const int64_t e = b + kernel;
  *begin = b < 0 ? 0 : b;
  *end = e > size ? size : e;
}

}  // namespace ortquant::qonnx
