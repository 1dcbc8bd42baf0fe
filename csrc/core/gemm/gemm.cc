#include "core/gemm/gemm.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm/cols_runs.h"
#include "core/gemm/kernels.h"
#include "core/scratch.h"

namespace ortquant::gemm {
namespace {

// Smallest amount of work (multiply-accumulates) worth a parallel task, and the most tasks per call.
constexpr int64_t kMinTaskWork = int64_t{1} << 19;
constexpr int64_t kMaxTasks = 64;
// Bytes of packed activations gemm_rows keeps hot (in L2) while the weight panels stream past.
constexpr int64_t kL2Block = 192 * 1024;
constexpr int32_t kMaxFlush = 1 << 20;  // k-groups between int16 -> int32 widenings when nothing can overflow

bool cpu_has_avxvnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool has_avxvnni() {
  static const bool v = cpu_has_avxvnni();
  return v;
}

TileFn tile_fn(Kernel k, bool cols) {
  switch (k) {
    case Kernel::kAvx512Vnni: return cols ? &avx512vnni::tile_cols : &avx512vnni::tile_rows;
    case Kernel::kAvxVnni: return cols ? &avxvnni::tile_cols : &avxvnni::tile_rows;
    case Kernel::kAvx2: return cols ? &avx2::tile_cols : &avx2::tile_rows;
    default: return cols ? &scalar::tile_cols : &scalar::tile_rows;
  }
}

// Splits `work` over at most `a_count` x `b_count` blocks, preferring to split the b dimension.
void split(int64_t work, int64_t a_count, int64_t b_count, int64_t* ta, int64_t* tb) {
  const int64_t tasks = std::clamp<int64_t>(work / kMinTaskWork, 1, kMaxTasks);
  *tb = std::max<int64_t>(1, std::min(b_count, tasks));
  *ta = std::max<int64_t>(1, std::min(a_count, (tasks + *tb - 1) / *tb));
}

}  // namespace

bool kernel_supported(Kernel k) {
  switch (k) {
    case Kernel::kAuto:
    case Kernel::kScalar: return true;
    case Kernel::kAvx2: return detected_isa() >= Isa::kAvx2;
    case Kernel::kAvxVnni: return path_available("avxvnni");
    case Kernel::kAvx512Vnni: return max_isa() == Isa::kAvx512Vnni;
  }
  return false;
}

Kernel resolve_kernel(Kernel k) {
  if (k != Kernel::kAuto) {
    if (!kernel_supported(k)) throw_error("the ", kernel_name(k), " GEMM kernel is not supported on this CPU");
    return k;
  }
  switch (active_isa()) {
    case Isa::kAvx512Vnni: return Kernel::kAvx512Vnni;
    case Isa::kAvx512: return has_avxvnni() ? Kernel::kAvxVnni : Kernel::kAvx2;
    case Isa::kAvx2:
      return avxvnni_selected() || (detected_isa() == Isa::kAvx2 && has_avxvnni()) ? Kernel::kAvxVnni : Kernel::kAvx2;
    case Isa::kScalar: break;
  }
  return Kernel::kScalar;
}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::kAuto: return "auto";
    case Kernel::kScalar: return "scalar";
    case Kernel::kAvx2: return "avx2";
    case Kernel::kAvxVnni: return "avxvnni";
    case Kernel::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool parse_kernel(const std::string& name, Kernel* out) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (Kernel k : {Kernel::kAuto, Kernel::kScalar, Kernel::kAvx2, Kernel::kAvxVnni, Kernel::kAvx512Vnni}) {
    if (n == kernel_name(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

namespace {
// Epilogue::x_max: activations in [0, x_max] allow int16 sums of this many k-groups (pair sums <= 2 x_max |w|);
// 0 without the promise.
int32_t nonneg_flush(const Epilogue& ep, const PackedWeights& w) {
  if (ep.x_max < 0 || ep.x_max > 127) return 0;
  return nonneg_flush_of(w, ep.x_max);
}
}  // namespace

int32_t biased_flush(const PackedWeights& w) {
  if (w.max_abs > 64) return 0;
  const int32_t pair = 2 * 255 * std::max<int32_t>(w.max_abs, 0);
  return pair == 0 ? kMaxFlush : std::max<int32_t>(1, std::min<int32_t>(kMaxFlush, 32767 / pair));
}

int exact_shift(const Epilogue& ep, const int32_t* bias, int64_t nbias, int64_t products) {
  if (ep.kind != OutKind::kInt8 && ep.kind != OutKind::kInt16 && ep.kind != OutKind::kInt32) return -1;
  int e = 0;
  if (!(ep.ratio > 0.0) || std::frexp(ep.ratio, &e) != 0.5) return -1;  // ratio = 0.5 * 2^e = 2^(e-1)
  const int shift = 1 - e;
  if (shift < 0 || shift > 30) return -1;
  if (ep.lo != std::floor(ep.lo) || ep.hi != std::floor(ep.hi) || ep.lo < -2147483648.0 || ep.hi > 2147483647.0 ||
      ep.lo > ep.hi)
    return -1;
  if (products < 0 || products > (int64_t{1} << 17)) return -1;
  int64_t bmax = 0;
  for (int64_t i = 0; bias != nullptr && i < nbias; ++i) bmax = std::max<int64_t>(bmax, std::llabs(bias[i]));
  const int64_t bound = products * 16384 + bmax + (int64_t{1} << shift);
  return bound < (int64_t{1} << 31) ? shift : -1;
}

int32_t proven_x_max(const int8_t* x, int64_t rows, int64_t cols, int64_t ld) {
  constexpr int64_t kBlock = 4096;
  uint8_t all = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* p = reinterpret_cast<const uint8_t*>(x + r * ld);
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      uint8_t acc = 0;
      for (int64_t c = c0; c < c1; ++c) acc = static_cast<uint8_t>(acc | p[c]);  // vectorized (-O3)
      if (acc & 0x80u) return -1;
      all = static_cast<uint8_t>(all | acc);
    }
  }
  int32_t bound = 0;
  while (bound < all) bound = 2 * bound + 1;
  return bound;
}

Epilogue with_proven_x_max(const Epilogue& ep, Kernel kernel, const int8_t* x, int64_t rows, int64_t cols,
                           int64_t ld) {
  Epilogue e = ep;
  if (ep.x_max < 0 && resolve_kernel(kernel) == Kernel::kAvx2) e.x_max = proven_x_max(x, rows, cols, ld);
  return e;
}

void run_inline(size_t n, const TaskFn& fn) {
  for (size_t i = 0; i < n; ++i) fn(i);
}

void gemm_rows(const int8_t* a, int64_t m, int64_t lda, const PackedWeights& w, const Epilogue& ep_in, void* out,
               int64_t ldc, const Parallel& par, Kernel kernel) {
  if (w.layout != PackedWeights::Layout::kPanels) throw_error("gemm_rows needs weights packed as panels");
  if (m < 0) throw_error("gemm: negative matrix size");
  if (m == 0 || w.n == 0) return;
  const TileFn fn = tile_fn(resolve_kernel(kernel), false);
  const Epilogue ep = with_proven_x_max(ep_in, kernel, a, m, w.k, lda);
  const int shift = exact_shift(ep, ep.bias, w.n, w.k);
  const int32_t flush = nonneg_flush(ep, w);
  const int32_t biased = biased_flush(w);
  const int64_t kg = w.kgroups;
  const int64_t mt = (m + kMR - 1) / kMR;
  const int64_t np = w.blocks();
  const int64_t tile_bytes = kg * kMR * 4;

  // Activations: sign-flipped, k-interleaved tiles of kMR rows; for signed activations against weights with -128 on
  // AVX2 also each row's sum of max(-x, 0) (TileArgs::xneg), stored after the tiles.
  const bool negsums = resolve_kernel(kernel) == Kernel::kAvx2 && !w.no_min && biased == 0 && flush == 0;
  const int64_t apack_bytes = mt * tile_bytes;
  uint8_t* const apack = thread_scratch_as<uint8_t>(
      ScratchSlot::kGemmRowsA, static_cast<size_t>(apack_bytes + (negsums ? mt * kMR * 4 + 4 : 0)));
  int32_t* const xneg = negsums ? reinterpret_cast<int32_t*>(apack + ((apack_bytes + 3) & ~int64_t{3})) : nullptr;
  {
    const int64_t chunks = std::clamp<int64_t>(m * w.k / (int64_t{1} << 18), 1, std::min<int64_t>(mt, kMaxTasks));
    par(static_cast<size_t>(chunks), [&](size_t c) {
      const int64_t t0 = mt * static_cast<int64_t>(c) / chunks, t1 = mt * static_cast<int64_t>(c + 1) / chunks;
      for (int64_t t = t0; t < t1; ++t) {
        pack_rows_tile(a, m, lda, w.k, t * kMR, apack + t * tile_bytes);
        if (negsums) avx2::tile_negsums(apack + t * tile_bytes, kg, xneg + t * kMR);
      }
    });
  }

  int64_t tm, tn;
  split(m * w.n * std::max<int64_t>(w.k, 1), mt, np, &tm, &tn);
  const size_t es = out_elem_size(ep.kind);
  const int64_t block_tiles = std::max<int64_t>(1, kL2Block / std::max<int64_t>(tile_bytes, 1));
  par(static_cast<size_t>(tm * tn), [&](size_t task) {
    const int64_t im = static_cast<int64_t>(task) / tn, in = static_cast<int64_t>(task) % tn;
    const int64_t p0 = np * in / tn, p1 = np * (in + 1) / tn;
    const int64_t t0 = mt * im / tm, t1 = mt * (im + 1) / tm;
    TileArgs args;
    args.kgroups = kg;
    args.ep = &ep;
    args.ldc = ldc;
    args.no_min = w.no_min;
    args.nonneg_flush = flush;
    args.biased_flush = biased;
    args.shift = shift;
    // Blocks of activation tiles small enough to stay in L2 while every weight panel streams past them.
    for (int64_t tb = t0; tb < t1; tb += block_tiles) {
      const int64_t te = std::min(t1, tb + block_tiles);
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t j0 = p * kPanel;
        args.b = w.data.data() + p * kg * kPanel * 4;
        args.nr = static_cast<int>(std::min<int64_t>(kPanel, w.n - j0));
        args.corr = w.corr.data() + j0;
        args.bias = ep.bias ? ep.bias + j0 : nullptr;
        for (int64_t t = tb; t < te; ++t) {
          const int64_t r0 = t * kMR;
          args.a = apack + t * tile_bytes;
          args.xneg = negsums ? xneg + t * kMR : nullptr;
          args.mr = static_cast<int>(std::min<int64_t>(kMR, m - r0));
          args.out = static_cast<char*>(out) + (r0 * ldc + j0) * static_cast<int64_t>(es);
          fn(args);
        }
      }
    }
  });
}

void gemm_cols(const PackedWeights& w, const PackedCols& x, const Epilogue& ep, void* out, int64_t ldc,
               const Parallel& par, Kernel kernel) {
  if (w.k != x.k) throw_error("gemm_cols: weights have K=", w.k, " but the columns K=", x.k);
  const uint8_t* base = x.data.data();
  const int64_t panel_bytes = x.kgroups * kPanel * 4;
  gemm_cols_source(
      w, x.p, [&](int64_t q, uint8_t*) { return base + q * panel_bytes; }, ep, out, ldc, par, kernel);
}

namespace {

// gemm_cols_source (proving == nullptr) and gemm_cols_source_proven (source == nullptr).
void cols_source_impl(const PackedWeights& w, int64_t p, const PanelSource* source, const ProvingPanelSource* proving,
                      const Epilogue& ep, void* out, int64_t ldc, const Parallel& par, Kernel kernel) {
  if (w.layout != PackedWeights::Layout::kRowBlocks) throw_error("gemm_cols needs weights packed as row blocks");
  if (p < 0) throw_error("gemm: negative matrix size");
  if (w.n == 0 || p == 0) return;
  const TileFn fn = tile_fn(resolve_kernel(kernel), true);
  const int64_t kg = w.kgroups;
  const int64_t mb = w.blocks();
  const int64_t pp = (p + kPanel - 1) / kPanel;
  // Split over pixel panels only while there are enough of them: splitting the weight blocks too would pack
  // each panel once per block range.
  int64_t tw, tp;
  split(w.n * p * std::max<int64_t>(w.k, 1), mb, pp, &tw, &tp);
  if (pp >= 8) tw = 1;
  const int64_t panel_bytes = std::max<int64_t>(kg * kPanel * 4, 64);
  const int32_t flush = nonneg_flush(ep, w);
  const int32_t biased = biased_flush(w);
  // Per-panel promises only where with_proven_x_max would have made one for the whole call.
  const bool per_panel = proving != nullptr && ep.x_max < 0 && resolve_kernel(kernel) == Kernel::kAvx2;
  const int shift = exact_shift(ep, ep.bias, w.n, w.k);
  uint8_t* const scratch =  // one panel per task
      thread_scratch_as<uint8_t>(ScratchSlot::kGemmPanels, static_cast<size_t>(tw * tp * panel_bytes));
  // Signed activations against weights with -128 and wider than 64 on AVX2: the per-pixel sums of TileArgs::xneg.
  const bool negsums = resolve_kernel(kernel) == Kernel::kAvx2 && !w.no_min && biased == 0;
  par(static_cast<size_t>(tw * tp), [&](size_t task) {
    const int64_t iw = static_cast<int64_t>(task) / tp, ip = static_cast<int64_t>(task) % tp;
    const int64_t q0 = pp * ip / tp, q1 = pp * (ip + 1) / tp;
    const int64_t b0 = mb * iw / tw, b1 = mb * (iw + 1) / tw;
    uint8_t* mine = scratch + static_cast<int64_t>(task) * panel_bytes;
    TileArgs args = call_args(w, ep, ldc);
    args.nonneg_flush = flush;
    args.biased_flush = biased;
    args.shift = shift;
    alignas(32) int32_t xneg[kPanel];
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t c0 = q * kPanel;
      if (proving == nullptr) {
        args.b = (*source)(q, mine);
      } else {
        int32_t x_max = -1;
        args.b = (*proving)(q, mine, &x_max);
        if (per_panel) {
          Epilogue e = ep;
          e.x_max = x_max;
          args.nonneg_flush = nonneg_flush(e, w);
        }
      }
      args.nr = static_cast<int>(std::min<int64_t>(kPanel, p - c0));
      args.xneg = nullptr;
      if (negsums && args.nonneg_flush == 0) {
        avx2::panel_negsums(static_cast<const uint8_t*>(args.b), kg, xneg);
        args.xneg = xneg;
      }
      for (int64_t blk = b0; blk < b1; ++blk) {
        set_weight_block(args, w, blk, out, c0);
        fn(args);
      }
    }
  });
}

}  // namespace

void gemm_cols_source(const PackedWeights& w, int64_t p, const PanelSource& source, const Epilogue& ep, void* out,
                      int64_t ldc, const Parallel& par, Kernel kernel) {
  cols_source_impl(w, p, &source, nullptr, ep, out, ldc, par, kernel);
}

void gemm_cols_source_proven(const PackedWeights& w, int64_t p, const ProvingPanelSource& source, const Epilogue& ep,
                             void* out, int64_t ldc, const Parallel& par, Kernel kernel) {
  cols_source_impl(w, p, nullptr, &source, ep, out, ldc, par, kernel);
}

bool cols_runs_supported(const Epilogue& ep, Kernel kernel, int64_t ow) {
  switch (resolve_kernel(kernel)) {
    case Kernel::kAvx2: return ep.x_max >= 0 && ep.x_max <= 127 && ow > 0 && ow % 8 == 0;
    case Kernel::kAvx512Vnni: return ow >= 16;
    default: return false;
  }
}

void gemm_cols_runs(const PackedWeights& w, const uint8_t* const* runs, int64_t oh, int64_t ow, int64_t cols,
                    const Epilogue& ep, void* out, int64_t ldc, const Parallel& par, Kernel kernel) {
  if (!cols_runs_supported(ep, kernel, ow)) throw_error("gemm_cols_runs: this kernel cannot read these runs");
  if (resolve_kernel(kernel) == Kernel::kAvx512Vnni) avx512vnni::gemm_cols_runs(w, runs, oh, ow, cols, ep, out, ldc, par);
  else avx2::gemm_cols_runs(w, runs, oh, ow, cols, ep, out, ldc, par);
}

}  // namespace ortquant::gemm
