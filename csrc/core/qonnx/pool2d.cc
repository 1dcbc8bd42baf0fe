#include "core/qonnx/pool2d.h"

#include "core/error.h"

namespace ortquant::qonnx {

int64_t pool_output_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, bool ceil_mode,
                        const char* axis) {
  const int64_t span = in + pad_begin + pad_end - kernel;
  if (span < 0)
    throw_error("the kernel (", kernel, ") is larger than the padded input along ", axis, " (", in, " + ", pad_begin,
                " + ", pad_end, ")");
  if (!ceil_mode) return span / stride + 1;
  int64_t out = (span + stride - 1) / stride + 1;
  // Like onnxruntime (and PyTorch): the last window must start inside the input or the begin padding.
  if ((out - 1) * stride >= in + pad_begin) --out;
  return out;
}

Pool2dDims pool2d_dims(const Shape& input, const Pool2dParams& p, bool channels_last) {
  if (input.size() != 4)
    throw_error("input must be 4-D ", channels_last ? "NHWC" : "NCHW", ", got shape ", shape_str(input));
  Pool2dDims d;
  d.n = input[0];
  if (channels_last) {
    d.h = input[1];
    d.w = input[2];
    d.c = input[3];
  } else {
    d.c = input[1];
    d.h = input[2];
    d.w = input[3];
  }
  d.oh = pool_output_dim(d.h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, p.ceil_mode, "H");
  d.ow = pool_output_dim(d.w, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, p.ceil_mode, "W");
  return d;
}

}  // namespace ortquant::qonnx
