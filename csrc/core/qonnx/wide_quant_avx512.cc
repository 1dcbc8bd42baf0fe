// The float64-parameter Quant row loop compiled for the avx512 path (flags chosen by this file's name in
// CMakeLists.txt).
#include <cmath>
#include <cstdint>

#include "core/qonnx/wide_quant_kernels.h"

namespace ortquant::qonnx::avx512 {
constexpr bool kExactReciprocal = true;
#include "core/qonnx/wide_quant_impl.inc"
}  // namespace ortquant::qonnx::avx512
