// BipolarQuant loop compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include "core/qonnx/bipolar_quant_kernels.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/bipolar_quant_impl.inc"
}  // namespace ortquant::qonnx::avx2
