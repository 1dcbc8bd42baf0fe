// Packed operand formats of the int8 GEMM engine (see gemm.h). Everything is 4-deep k-interleaved: k-group g of
// a block holds, for each of its rows/lanes, the 4 bytes k = 4g .. 4g+3 (zero beyond K), which is what one
// int32 lane of vpdpbusd / vpmaddwd consumes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace ortquant::gemm {

constexpr int kMR = 6;             // rows of a register tile (activation rows in gemm_rows, weight rows in gemm_cols)
constexpr int kPanel = 64;         // lanes of a panel (weight rows in gemm_rows, pixels in gemm_cols)
constexpr int64_t kMaxK = 131071;  // longest reduction whose s8 x s8 sum always fits in int32

inline int64_t kgroups_of(int64_t k) { return (k + 3) / 4; }

// 64-byte aligned storage for packed operands.
template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  void resize(size_t n) {
    ptr_.reset(n ? static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))) : nullptr);
    size_ = n;
  }
  T* data() { return ptr_.get(); }
  const T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(T* p) const { ::operator delete(p, std::align_val_t(64)); }
  };
  std::unique_ptr<T, Free> ptr_;
  size_t size_ = 0;
};

// Weights W[n][k] (row j = the weights of output j), packed once. Rows beyond n and k beyond K are zero.
struct PackedWeights {
  enum class Layout : uint8_t {
    kPanels,     // for gemm_rows: [ceil(n/kPanel)][kgroups][kPanel][4]
    kRowBlocks,  // for gemm_cols: [ceil(n/kMR)][kgroups][kMR][4]
  };
  Layout layout = Layout::kPanels;
  int64_t n = 0, k = 0, kgroups = 0;
  AlignedBuffer<int8_t> data;
  std::vector<int32_t> corr;  // 128 * sum_k W[j][k] per row j (the sign-flip correction), padded with zeros
  bool no_min = false;  // no weight is -128 (|w| <= 127: the AVX2 kernels' vpmaddubsw cannot saturate)
  int32_t max_abs = 128;  // the largest |w| (bounds the AVX2 int16 sums of Epilogue::x_max)
  // kRowBlocks only (packed once per session): run_abs[f - 1], f = 1 .. size(), is the largest sum of |w| over one
  // half (byte pair 0-1 or 2-3) of f consecutive k-groups starting at a multiple of f, over all rows: a vpmaddubsw
  // int16 lane that adds f k-groups' pair sums of activations in [0, x_max] stays within x_max * run_abs[f - 1]
  // (nonneg_flush_of). Empty: only max_abs bounds them.
  std::vector<int32_t> run_abs;
  int block() const { return layout == Layout::kPanels ? kPanel : kMR; }
  int64_t blocks() const { return (n + block() - 1) / block(); }
};

// The number of k-groups whose vpmaddubsw pair sums of activations in [0, x_max] (x_max in 0..127) times w can be
// added in int16 without overflow before widening (>= 1; kMaxFlushGroups when no sum can overflow): the larger of
// 32767 / (2 * x_max * max_abs) and the longest run that PackedWeights::run_abs bounds within 32767. The AVX2 kernels
// widen at k-groups 0, f, 2f, ... (the runs run_abs measures).
constexpr int32_t kMaxFlushGroups = 1 << 20;
int32_t nonneg_flush_of(const PackedWeights& w, int32_t x_max);

// W given row-major with row stride ldw (elements). Throws Error if k > kMaxK.
PackedWeights pack_weights(const int8_t* w, int64_t n, int64_t k, int64_t ldw, PackedWeights::Layout layout);
// W[j][kk] = base[j * sn + kk * sk] (any strides, e.g. transposed-convolution weights).
PackedWeights pack_weights_strided(const int8_t* base, int64_t n, int64_t k, int64_t sn, int64_t sk,
                                   PackedWeights::Layout layout);
// W = B transposed, B given as [k][n] with row stride ldb (BmmInt's second operand). kPanels layout.
PackedWeights pack_weights_kmajor(const int8_t* b, int64_t k, int64_t n, int64_t ldb);

// Activation columns for gemm_cols: X[k][p] packed as [ceil(P/kPanel)][kgroups][kPanel][4] u8, sign-flipped.
struct PackedCols {
  int64_t p = 0, k = 0, kgroups = 0;
  AlignedBuffer<uint8_t> data;
  int64_t panels() const { return (p + kPanel - 1) / kPanel; }
};
// Sizes (and allocates) `c` for p columns and k rows.
void prepare_cols(PackedCols* c, int64_t p, int64_t k);
// Writes k-group kg of every panel from four rows of X (rows[i] = X[4kg + i][0..p), nullptr = a zero row).
void pack_cols_group(PackedCols* c, int64_t kg, const int8_t* const rows[4]);
// Packs a whole X given as [k][p] with row stride ldx, k-groups [kg0, kg1).
void pack_cols(PackedCols* c, const int8_t* x, int64_t ldx, int64_t kg0, int64_t kg1);

// One pixel panel for gemm_cols_source: k-group g holds rows[4g .. 4g+3] (rows[kk] = X[kk][...], nullptr = zeros)
// at pixels [p0, p0 + n), sign-flipped, lanes beyond n = 0x80; dst is [kgroups_of(k)][kPanel][4].
void pack_panel(const int8_t* const* rows, int64_t k, int64_t p0, int64_t n, uint8_t* dst);

// Activation rows for gemm_rows: rows [m0, m0 + kMR) of a (row stride lda), k-groups [0, kgroups), into one tile
// [kgroups][kMR][4] u8, sign-flipped (a ^ 0x80); rows beyond m and k beyond K hold 0x80 (the value 0).
void pack_rows_tile(const int8_t* a, int64_t m, int64_t lda, int64_t k, int64_t m0, uint8_t* tile);

}  // namespace ortquant::gemm
