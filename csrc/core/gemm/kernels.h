// Micro-kernels of the GEMM engine, one set per instruction set (kernel_<isa>.cc). Each computes one register
// tile over the whole reduction and applies the epilogue in registers, writing the final output directly.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/gemm/epilogue.h"
#include "core/gemm/pack.h"

namespace ortquant::gemm {

// One tile: `mr` (<= kMR) tile rows x `nr` (<= kPanel) panel lanes, over `kgroups` k-groups.
//   rows orientation: a = activation tile [kgroups][kMR][4] u8, b = weight panel [kgroups][kPanel][4] s8;
//     element (r, c) -> out + r * ldc + c, weight row (bias, corr) = w0 + c.
//   cols orientation: a = weight block [kgroups][kMR][4] s8, b = pixel panel [kgroups][kPanel][4] u8;
//     element (r, c) -> out + r * ldc + c, weight row = w0 + r.
struct TileArgs {
  const void* a;
  const void* b;
  int64_t kgroups;
  int mr;
  int nr;
  const Epilogue* ep;
  const int32_t* corr;  // already offset to weight row w0
  const int32_t* bias;  // already offset to weight row w0, or null
  void* out;            // already offset to the tile's first element (in elements of ep->kind)
  int64_t ldc;
  bool no_min = false;           // no weight of the packed matrix is -128 (PackedWeights::no_min)
  // From Epilogue::x_max (either orientation): > 0 when every activation is in [0, 127]; the number of k-groups whose
  // vpmaddubsw pair sums (each |.| <= 2 * x_max * max|w|) can be added in int16 without overflow (1: none).
  int32_t nonneg_flush = 0;
  // From PackedWeights::max_abs (either orientation, used when nonneg_flush == 0): > 0 when every |w| <= 64, so that
  // vpmaddubsw on the sign-flipped activation bytes as they are (x + 128 in [0, 255]) times w cannot saturate (pair sums
  // <= 2 * 255 * 64 = 32640); the number of k-groups whose pair sums can be added in int16 (1: none).
  int32_t biased_flush = 0;
  // AVX2, signed activations and weights with -128: sum_k max(-x, 0) per pixel of the panel (cols orientation,
  // avx2::panel_negsums, kPanel entries) or per row of the activation tile (rows, avx2::tile_negsums, kMR entries),
  // for the kernels that need no vpsignb; null: not computed.
  const int32_t* xneg = nullptr;
  // exact_shift(*ep, ...) of the call (>= 0: the 8-lane epilogues may requantize in int32; -1: float64).
  int shift = -1;
};

using TileFn = void (*)(const TileArgs&);

// Tasks of a gemm_cols_runs call over p pixels in `units` pixel units: about 1M multiply-adds each, at most one
// per unit and 64 in all.
inline int64_t runs_tasks(const PackedWeights& w, int64_t p, int64_t units) {
  return std::clamp<int64_t>((w.n * p * std::max<int64_t>(w.k, 1)) >> 20, 1, std::min<int64_t>(units, 64));
}

// The fields of TileArgs that one GEMM call keeps for every tile (either orientation); the rest are per tile.
inline TileArgs call_args(const PackedWeights& w, const Epilogue& ep, int64_t ldc) {
  TileArgs t{};
  t.kgroups = w.kgroups;
  t.ep = &ep;
  t.ldc = ldc;
  t.no_min = w.no_min;
  return t;
}

// A cols tile's weight fields: block blk of w (kRowBlocks: kMR rows of w.kgroups k-groups), its rows' corrections
// and bias, and its output at row blk * kMR, column c0 of out (elements of ep.kind, row stride t.ldc).
inline void set_weight_block(TileArgs& t, const PackedWeights& w, int64_t blk, void* out, int64_t c0) {
  const int64_t r0 = blk * kMR;
  t.a = w.data.data() + blk * w.kgroups * kMR * 4;
  t.mr = static_cast<int>(w.n - r0 < kMR ? w.n - r0 : kMR);
  t.corr = w.corr.data() + r0;
  t.bias = t.ep->bias ? t.ep->bias + r0 : nullptr;
  t.out = static_cast<char*>(out) + (r0 * t.ldc + c0) * static_cast<int64_t>(out_elem_size(t.ep->kind));
}

#define ORTQUANT_GEMM_DECLARE(ns)       \
  namespace ns {                        \
  void tile_rows(const TileArgs& t);    \
  void tile_cols(const TileArgs& t);    \
  }
ORTQUANT_GEMM_DECLARE(scalar)
ORTQUANT_GEMM_DECLARE(avx2)
ORTQUANT_GEMM_DECLARE(avxvnni)
ORTQUANT_GEMM_DECLARE(avx512vnni)
#undef ORTQUANT_GEMM_DECLARE

namespace avx2 {
// out[p] = sum over the k-groups of max(-x, 0) for each of the kPanel pixels of a cols panel ([kgroups][kPanel][4]
// bytes x + 128; zero padding contributes 0): TileArgs::xneg.
void panel_negsums(const uint8_t* panel, int64_t kgroups, int32_t* out);
// The same per row of a rows-orientation activation tile ([kgroups][kMR][4] bytes x + 128): out[kMR].
void tile_negsums(const uint8_t* tile, int64_t kgroups, int32_t* out);
}  // namespace avx2

// Typed output pointer arithmetic for the epilogue.
inline void* out_at(void* out, OutKind k, int64_t idx) {
  return static_cast<char*>(out) + idx * static_cast<int64_t>(out_elem_size(k));
}

}  // namespace ortquant::gemm
