// Pool loops over codes compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include <cstdint>

#include "core/integer/pool_kernels.h"

namespace ortquant::integer::scalar {
#include "core/integer/pool_impl.inc"
}  // namespace ortquant::integer::scalar
