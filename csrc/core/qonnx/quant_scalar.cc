// Quant loops compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt). This path is
// the oracle: the literal formula, with true division.
#include <algorithm>
#include <cmath>

#include "core/half_block.h"
#include "core/qonnx/quant_kernels.h"

namespace ortquant::qonnx::scalar {
constexpr bool kExactReciprocal = false;
#include "core/qonnx/quant_impl.inc"
}  // namespace ortquant::qonnx::scalar
