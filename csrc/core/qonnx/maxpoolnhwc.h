// QONNX MaxPoolNHWC (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 8.
// Max pooling of an NHWC tensor with ONNX MaxPool geometry (pads [top, left, bottom, right], ceil_mode as
// onnxruntime computes it); padding never wins (-inf). Each window is scanned row by row from -inf with
//   m = (v > m || v is NaN) ? v : m
// (PyTorch's max_pool2d rule): NaN anywhere in the window gives NaN; of equal values (-0, +0) the first wins.
#pragma once
#include <cstdint>

#include "core/qonnx/pool2d.h"

namespace ortquant::qonnx {

// Output pixels [r0, r1) of the (N, OH, OW, C) output (pixel = (n, i, j) in row-major order).
void maxpool_nhwc(const float* x, float* y, const Pool2dDims& d, const Pool2dParams& p, int64_t r0, int64_t r1);

}  // namespace ortquant::qonnx
