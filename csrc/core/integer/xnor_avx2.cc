// XNOR-popcount loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <cstdint>
#include <cstring>

#include "core/simd.h"

#include "core/integer/xnor_kernels.h"

namespace ortquant::integer::avx2 {
#include "core/integer/xnor_impl.inc"
}  // namespace ortquant::integer::avx2
