// MaxPoolNHWC loops compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include "core/qonnx/maxpoolnhwc_kernels.h"

namespace ortquant::qonnx::scalar {
#include "core/qonnx/maxpoolnhwc_impl.inc"
}  // namespace ortquant::qonnx::scalar
