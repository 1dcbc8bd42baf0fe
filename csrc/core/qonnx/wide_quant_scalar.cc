// The float64-parameter Quant row loop compiled for the scalar path (flags chosen by this file's name in
// CMakeLists.txt). This path is the oracle: the literal formula, with true division.
#include <cmath>
#include <cstdint>

#include "core/qonnx/wide_quant_kernels.h"

namespace ortquant::qonnx::scalar {
constexpr bool kExactReciprocal = false;
#include "core/qonnx/wide_quant_impl.inc"
}  // namespace ortquant::qonnx::scalar
