// LSTM/GRU step loops compiled for the scalar path (flags chosen by this file's name in CMakeLists.txt).
#include "core/simd.h"

#include <cmath>
#include <cstring>

#include "core/linger/rnn_cell_kernels.h"
#include "core/lut.h"

namespace ortquant::linger::scalar {
#include "core/linger/rnn_cell_impl.inc"
}  // namespace ortquant::linger::scalar
