// BipolarQuant loop compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include "core/qonnx/bipolar_quant_kernels.h"

namespace ortquant::qonnx::scalar {
#include "core/qonnx/bipolar_quant_impl.inc"
}  // namespace ortquant::qonnx::scalar
