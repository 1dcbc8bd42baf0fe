// XnorPopcountMatMul loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
// GCC 12 reports its own AVX-512 intrinsics (which start from _mm512_undefined_*) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/simd.h"

#include "core/qonnx/xnorpopcount_kernels.h"

namespace ortquant::qonnx::avx512 {
#include "core/qonnx/xnorpopcount_impl.inc"
}  // namespace ortquant::qonnx::avx512
