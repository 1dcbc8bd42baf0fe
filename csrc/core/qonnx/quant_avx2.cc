// Quant loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>

#include "core/half_block.h"
#include "core/qonnx/quant_kernels.h"

namespace ortquant::qonnx::avx2 {
constexpr bool kExactReciprocal = true;
#include "core/qonnx/quant_impl.inc"
}  // namespace ortquant::qonnx::avx2
