#include "core/qonnx/im2col.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ortquant::qonnx {

Im2ColDims im2col_dims(const Shape& input, const Im2ColParams& p) {
  if (input.size() != 4) throw_error("input must be 4-D NHWC, got shape ", shape_str(input));
  Im2ColDims d;
  d.n = input[0];
  d.h = input[1];
  d.w = input[2];
  d.c = input[3];
  for (int64_t v : input)
    if (v < 0) throw_error("negative dimension in input shape ", shape_str(input));
  const char* what = "Im2Col output size";
  const int64_t span_h = checked_sub(checked_add(checked_add(d.h, p.pad_top, what), p.pad_bottom, what),
                                     checked_add(checked_mul(p.dilation_h, p.kernel_h - 1, what), 1, what), what);
  const int64_t span_w = checked_sub(checked_add(checked_add(d.w, p.pad_left, what), p.pad_right, what),
                                     checked_add(checked_mul(p.dilation_w, p.kernel_w - 1, what), 1, what), what);
  if (span_h < 0 || span_w < 0)
    throw_error("the kernel (", p.kernel_h, " x ", p.kernel_w, ", dilations ", p.dilation_h, " x ", p.dilation_w,
                ") does not fit the padded input of shape ", shape_str(input));
  d.oh = checked_div(span_h, p.stride_h, what) + 1;
  d.ow = checked_div(span_w, p.stride_w, what) + 1;
  checked_mul(checked_mul(p.kernel_h, p.kernel_w, what), d.c, what);  // row_size() below cannot overflow
  return d;
}

void im2col_nhwc(const float* x, float* y, const Im2ColDims& d, const Im2ColParams& p, int64_t r0, int64_t r1) {
  const int64_t c = d.c;
  const int64_t row_size = d.row_size(p);
  const size_t bytes = static_cast<size_t>(c) * sizeof(float);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / (d.oh * d.ow);
    const int64_t i = (r / d.ow) % d.oh;
    const int64_t j = r % d.ow;
    const float* xn = x + n * d.h * d.w * c;
    float* dst = y + r * row_size;
    for (int64_t a = 0; a < p.kernel_h; ++a) {
      const int64_t ih = i * p.stride_h - p.pad_top + a * p.dilation_h;
      for (int64_t b = 0; b < p.kernel_w; ++b, dst += c) {
        const int64_t iw = j * p.stride_w - p.pad_left + b * p.dilation_w;
        if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w) {
          if (bytes) std::memcpy(dst, xn + (ih * d.w + iw) * c, bytes);
        } else {
          std::fill(dst, dst + c, p.pad_value);
        }
      }
    }
  }
}

}  // namespace ortquant::qonnx
