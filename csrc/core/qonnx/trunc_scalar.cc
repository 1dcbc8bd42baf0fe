// Trunc loops compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>

#include "core/half_block.h"
#include "core/qonnx/trunc_kernels.h"
#include "core/rounding.h"

namespace ortquant::qonnx::scalar {
#include "core/qonnx/trunc_impl.inc"
}  // namespace ortquant::qonnx::scalar
