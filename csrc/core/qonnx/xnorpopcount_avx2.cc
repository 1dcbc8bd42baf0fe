// XnorPopcountMatMul loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include "core/simd.h"

#include "core/qonnx/xnorpopcount_kernels.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/xnorpopcount_impl.inc"
}  // namespace ortquant::qonnx::avx2
