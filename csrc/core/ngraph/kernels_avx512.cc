// nGraph Quantize/Dequantize loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "core/ngraph/kernels.h"

namespace ortquant::ngraph::avx512 {
#include "core/ngraph/kernels_impl.inc"
}  // namespace ortquant::ngraph::avx512
