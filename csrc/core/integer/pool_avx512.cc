// Pool loops over codes compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include <cstdint>

#include "core/simd.h"

#include "core/integer/pool_kernels.h"

namespace ortquant::integer::avx512 {
#include "core/integer/pool_impl.inc"
}  // namespace ortquant::integer::avx512
