// QuantAvgPool2d loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <cmath>
#include <limits>

#include "core/qonnx/quantavgpool2d_kernels.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/quantavgpool2d_impl.inc"
}  // namespace ortquant::qonnx::avx2
