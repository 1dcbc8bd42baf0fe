// MaxPoolNHWC loops compiled for the avx2 path (flags chosen by this file's name in CMakeLists.txt).
#include "core/qonnx/maxpoolnhwc_kernels.h"

namespace ortquant::qonnx::avx2 {
#include "core/qonnx/maxpoolnhwc_impl.inc"
}  // namespace ortquant::qonnx::avx2
