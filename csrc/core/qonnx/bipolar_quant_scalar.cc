// BipolarQuant loop compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include <algorithm>
#include <cmath>

#include "core/half_block.h"
#include "core/qonnx/bipolar_quant_kernels.h"
#include "core/rounding.h"

namespace ortquant::qonnx::scalar {
#include "core/qonnx/bipolar_quant_impl.inc"
}  // namespace ortquant::qonnx::scalar
