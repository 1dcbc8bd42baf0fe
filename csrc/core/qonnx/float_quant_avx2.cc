// FloatQuant loop compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half_block.h"
#include "core/qonnx/float_quant_kernels.h"
#include "core/rounding.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/float_quant_impl.inc"
}  // namespace ortquant::qonnx::avx2
