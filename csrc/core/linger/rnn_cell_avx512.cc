// LSTM/GRU step loops compiled for the avx512 path (flags chosen by this file's name in CMakeLists.txt).
// GCC 12 reports -Wmaybe-uninitialized inside avx512fintrin.h for plain intrinsics (the headers pass
// _mm512_undefined_epi32() as the unused merge source); a known false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/simd.h"

#include <cmath>
#include <cstring>

#include "core/linger/rnn_cell_kernels.h"
#include "core/lut.h"

namespace ortquant::linger::avx512 {
#include "core/linger/rnn_cell_impl.inc"
}  // namespace ortquant::linger::avx512
