// The cols orientation of the GEMM engine without packed pixel panels: the convolution keeps its input as
// channel-quad planes (4 channels side by side per position, sign-flipped as a panel holds them) and the kernel reads
// every k-group of its output pixels straight from them, so nothing is copied per tap. Same sums and epilogue as
// tile_cols (exact).
// - AVX2 (cols_runs_avx2.cc): activations in [0, 127] (Epilogue::x_max, integer mode's unsigned codes), groups of 8
//   output pixels within one output row (ow a multiple of 8).
// - AVX-512 VNNI (kernel_avx512vnni.cc): any activations (vpdpbusd sums u8 x s8 exactly); 16-pixel vectors that may
//   cross one row end, read with two masked loads (ow >= 16).
#pragma once
#include <cstdint>

#include "core/gemm/gemm.h"

namespace ortquant::gemm {

// Whether gemm_cols_runs can run this call with this kernel (the conditions above).
bool cols_runs_supported(const Epilogue& ep, Kernel kernel, int64_t ow);

// out[i][y * ow + x] (row stride ldc) = epi(sum_k W[i][k] * X[k][(y, x)]) for i < w.n, y < oh, x < ow, where k-group g
// (k = 4g .. 4g+3) of output pixel (y, x) is the 4 bytes at runs[g] + 4 * (y * cols + x), each byte the activation
// ^ 0x80. W uses kRowBlocks with w.kgroups k-groups; needs cols_runs_supported(ep, kernel, ow).
void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par, Kernel kernel);

namespace avx2 {
void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par);
}  // namespace avx2
namespace avx512vnni {
void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par);
}  // namespace avx512vnni

}  // namespace ortquant::gemm
