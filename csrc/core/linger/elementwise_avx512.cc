// linger elementwise loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include "core/simd.h"

#include <cmath>
#include <limits>

#include "core/linger/elementwise_kernels.h"

namespace ortquant::linger::avx512 {
#include "core/linger/elementwise_impl.inc"
}  // namespace ortquant::linger::avx512
