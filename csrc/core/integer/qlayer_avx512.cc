// Integer-mode layer loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include <cmath>
#include <cstdint>

#include "core/integer/qlayer_kernels.h"

namespace ortquant::integer::avx512 {
#include "core/integer/qlayer_impl.inc"
}  // namespace ortquant::integer::avx512
