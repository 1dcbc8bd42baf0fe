// Trunc loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>

#include "core/half_block.h"
#include "core/qonnx/trunc_kernels.h"
#include "core/rounding.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/trunc_impl.inc"
}  // namespace ortquant::qonnx::avx2
