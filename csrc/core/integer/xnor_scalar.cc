// XNOR-popcount loops compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include <cstdint>
#include <cstring>

#include "core/integer/xnor_kernels.h"

namespace ortquant::integer::scalar {
#include "core/integer/xnor_impl.inc"
}  // namespace ortquant::integer::scalar
