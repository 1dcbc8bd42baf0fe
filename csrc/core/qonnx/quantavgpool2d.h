// QONNX QuantAvgPool2d (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 9.
// Square kernel k, stride s, no padding, NCHW or NHWC. Per output:
//   S = 0 + x(0,0) + x(0,1) + ... + x(k-1,k-1)       float32, window in row-major order
//   v = round_half_even(fl(fl(S / k^2) * k^2))       (qonnx: onnxruntime AveragePool, times k*k, np.round)
//   q = int64(v) >> shift                            arithmetic shift; NaN/out-of-range int64 -> INT64_MIN (x86)
//   Y = float32(q),   shift = max(0, bit_length((2^ibits - 1) * k^2) - obits)
#pragma once
#include <cstdint>

#include "core/qonnx/pool2d.h"

namespace ortquant::qonnx {

// The right shift; throws Error for ibits/obits outside [1, 64] or kernel outside [1, 65535].
int quant_avgpool_shift(int64_t ibits, int64_t obits, int64_t kernel);

struct QuantAvgPoolParams {
  int64_t kernel = 1;
  int64_t stride = 1;
  int shift = 0;
  Pool2dParams geometry() const {
    Pool2dParams p;
    p.kernel_h = p.kernel_w = kernel;
    p.stride_h = p.stride_w = stride;
    return p;
  }
};

// NCHW: output rows [r0, r1) of length OW (row = (n, c, i)); `scratch` holds OW floats.
void quant_avgpool_nchw(const float* x, float* y, const Pool2dDims& d, const QuantAvgPoolParams& p, float* scratch,
                        int64_t r0, int64_t r1);
// NHWC: output pixels [r0, r1) of C values (pixel = (n, i, j)).
void quant_avgpool_nhwc(const float* x, float* y, const Pool2dDims& d, const QuantAvgPoolParams& p, int64_t r0,
                        int64_t r1);

}  // namespace ortquant::qonnx
