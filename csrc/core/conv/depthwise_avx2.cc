// Depthwise convolution loops for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/conv/depthwise_kernels.h"

namespace ortquant::conv::avx2 {
#include "core/conv/depthwise_impl.inc"
}  // namespace ortquant::conv::avx2
