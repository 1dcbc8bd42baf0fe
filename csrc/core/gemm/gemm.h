// The int8 GEMM engine of the linger matrix ops (LinearInt, BmmInt, Conv*Int): s8 x s8 products accumulated
// exactly in int32, with a fused epilogue (bias, luna round-half-up requantization, saturation, or float).
//
// How it is fast (shared/specs/ort-custom-ops.md section 3): the weights are packed once into 4-deep
// k-interleaved blocks; the s8 activations are packed per call with their sign bit flipped (a ^ 0x80 = a + 128,
// a u8), so the u8 x s8 dot-product instructions (vpdpbusd) apply; the extra 128 * sum_k W[j][k] is precomputed
// per weight row at packing time and subtracted in the epilogue. The int32 accumulator wraps modulo 2^32, but the
// true sum fits in int32 (|sum| <= 2^14 * K, K <= kMaxK), so the corrected value is exact.
//
// Two orientations share the packed formats:
//   rows  (LinearInt, BmmInt): out[m][j] = epi(sum_k A[m][k] * W[j][k]); activations broadcast, weights in
//         vector lanes (panels of kPanel weight rows).
//   cols  (convolution): out[i][p] = epi(sum_k W[i][k] * X[k][p]); weights broadcast (blocks of kMR weight
//         rows), activations (im2col columns = output pixels) in vector lanes (panels of kPanel pixels).
//         The output comes out in NCHW order directly.
// Kernel paths: scalar (the oracle), AVX2 (u8/s8 widened to int16, vpmaddwd: exact, no int16 saturation),
// AVX-VNNI (ymm vpdpbusd), AVX-512 VNNI (zmm vpdpbusd, 6x4 register tile = 24 accumulators).
// Threads: only through the Parallel callback (the ORT adapter maps it onto onnxruntime's intra-op pool).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/function_ref.h"
#include "core/gemm/epilogue.h"
#include "core/gemm/pack.h"

namespace ortquant::gemm {

// Kernel paths. kAuto follows core/cpu.h active_isa(): avx512vnni -> AVX-512 VNNI; avx512 -> AVX-VNNI if the CPU
// has it, else AVX2; avx2 -> AVX2 (AVX-VNNI only when the CPU's best level is AVX2 and it has AVX-VNNI, i.e. the
// path was not forced down, or when the "avxvnni" path is selected: core/cpu.h avxvnni_selected()); scalar -> scalar.
enum class Kernel : int { kAuto = -1, kScalar = 0, kAvx2 = 1, kAvxVnni = 2, kAvx512Vnni = 3 };

Kernel resolve_kernel(Kernel k);  // kAuto -> the path to use; throws Error for a path this CPU cannot run
bool kernel_supported(Kernel k);
const char* kernel_name(Kernel k);
bool parse_kernel(const std::string& name, Kernel* out);  // "scalar", "avx2", "avxvnni", "avx512vnni", "auto"

// Runs fn(task) for every task in [0, n), possibly concurrently; fn does not throw.
// A task of a parallel loop: called during the loop only (FunctionRef: no allocation per call).
using TaskFn = FunctionRef<void(size_t)>;
using Parallel = std::function<void(size_t n, const TaskFn& fn)>;
void run_inline(size_t n, const TaskFn& fn);

// The promise of Epilogue::x_max that the activations prove themselves: -1 when some value is negative, else
// 2^b - 1 for the bit length b of the OR of all values (>= the largest). rows x cols int8 with row stride ld.
// Stops at the first 4 KiB block that holds a negative value, so signed data costs little to rule out.
int32_t proven_x_max(const int8_t* x, int64_t rows, int64_t cols, int64_t ld);
// `ep` with x_max = proven_x_max(x, ...) when no promise is made yet (ep.x_max < 0) and the resolved `kernel` is the
// one that uses it (AVX2: vpmaddubsw without the sign step, 3 vector ops per 32 multiply-adds instead of 4);
// otherwise `ep` as it is. The result is the same either way (the kernels are exact); only the speed differs.
Epilogue with_proven_x_max(const Epilogue& ep, Kernel kernel, const int8_t* x, int64_t rows, int64_t cols, int64_t ld);

// Weights with every |w| <= 64 (PackedWeights::max_abs) let the AVX2 kernels multiply any activations without the
// sign step: vpmaddubsw on the packed bytes x + 128 in [0, 255] times w cannot saturate (pair sums <= 2 * 255 * 64 =
// 32640 < 2^15). Returns how many k-groups of those pair sums can be added in int16 before widening (>= 1), or 0 for
// wider weights (the sign or widening kernels then).
int32_t biased_flush(const PackedWeights& w);

// out[m][j] (row stride ldc elements of the output kind) = epi(sum_k a[m][k] * W[j][k]), a with row stride lda.
// W must use the kPanels layout. Activations that are all non-negative take the AVX2 kernels' cheaper product
// (with_proven_x_max).
void gemm_rows(const int8_t* a, int64_t m, int64_t lda, const PackedWeights& w, const Epilogue& ep, void* out,
               int64_t ldc, const Parallel& par, Kernel kernel = Kernel::kAuto);

// out[i][p] (row stride ldc) = epi(sum_k W[i][k] * X[k][p]) for i < w.n, p < x.p. W must use kRowBlocks.
void gemm_cols(const PackedWeights& w, const PackedCols& x, const Epilogue& ep, void* out, int64_t ldc,
               const Parallel& par, Kernel kernel = Kernel::kAuto);

// The same with the pixel panels produced on demand, so each is packed into a task's L1-sized scratch right
// before the weight blocks run over it (the convolutions' implicit im2col): source(q, scratch) returns panel q
// ([kgroups][kPanel][4], e.g. written into scratch by pack_panel). It runs inside pool tasks: it must not throw.
using PanelSource = FunctionRef<const uint8_t*(int64_t panel, uint8_t* scratch)>;
void gemm_cols_source(const PackedWeights& w, int64_t p, const PanelSource& source, const Epilogue& ep, void* out,
                      int64_t ldc, const Parallel& par, Kernel kernel = Kernel::kAuto);

// The same where the source also proves each panel's activations: source(q, scratch, &x_max) sets x_max to the
// promise of Epilogue::x_max for panel q alone (-1: none), e.g. from the bytes it packed, so that no separate pass
// over the input is needed and a panel of non-negative values takes the cheaper AVX2 product even when others do
// not. Used when ep.x_max < 0 (no promise for the whole call) and the resolved kernel is AVX2, as in
// with_proven_x_max; the result is the same either way.
using ProvingPanelSource = FunctionRef<const uint8_t*(int64_t panel, uint8_t* scratch, int32_t* x_max)>;
void gemm_cols_source_proven(const PackedWeights& w, int64_t p, const ProvingPanelSource& source, const Epilogue& ep,
                             void* out, int64_t ldc, const Parallel& par, Kernel kernel = Kernel::kAuto);

}  // namespace ortquant::gemm
