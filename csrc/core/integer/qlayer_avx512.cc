// Integer-mode layer loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/integer/qlayer_kernels.h"
#include "core/simd.h"
#include "core/qonnx/quant_kernels.h"

namespace ortquant::integer::avx512 {
// x / s as x * (1 / s) where that is the same value (qonnx::exact_reciprocal); the scalar path keeps the division.
constexpr bool kExactReciprocal = true;
#include "core/integer/qlayer_impl.inc"
}  // namespace ortquant::integer::avx512
