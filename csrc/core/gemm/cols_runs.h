// The cols orientation of the GEMM engine without packed pixel panels, for the AVX2 kernel with activations in
// [0, 127] (Epilogue::x_max, integer mode's unsigned codes): the convolution keeps its input as channel-quad planes
// (4 channels side by side per position, sign-flipped as a panel holds them) and the kernel reads every k-group of 8
// output pixels straight from them, so nothing is copied per tap. Same sums and epilogue as tile_cols (exact).
#pragma once
#include <cstdint>

#include "core/gemm/gemm.h"

namespace ortquant::gemm {

// Whether gemm_cols_runs can run this call: the resolved kernel is AVX2, ep.x_max is in [0, 127] and ow is a
// multiple of 8 (every group of 8 output pixels lies in one output row).
bool cols_runs_supported(const Epilogue& ep, Kernel kernel, int64_t ow);

namespace avx2 {
// out[i][y * ow + x] (row stride ldc) = epi(sum_k W[i][k] * X[k][(y, x)]) for i < w.n, y < oh, x < ow, where k-group g
// (k = 4g .. 4g+3) of output pixel (y, x) is the 4 bytes at runs[g] + 4 * (y * cols + x), each byte the activation
// ^ 0x80. W uses kRowBlocks with w.kgroups k-groups; needs cols_runs_supported().
void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par);
}  // namespace avx2

}  // namespace ortquant::gemm
