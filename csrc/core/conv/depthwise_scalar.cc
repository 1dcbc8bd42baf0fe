// Depthwise convolution loops for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/conv/depthwise_kernels.h"

namespace ortquant::conv::scalar {
#include "core/conv/depthwise_impl.inc"
}  // namespace ortquant::conv::scalar
