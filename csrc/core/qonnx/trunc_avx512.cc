// Trunc loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
#include "core/qonnx/trunc_kernels.h"

namespace ortquant::qonnx::avx512 {
#include "core/qonnx/trunc_impl.inc"
}  // namespace ortquant::qonnx::avx512
