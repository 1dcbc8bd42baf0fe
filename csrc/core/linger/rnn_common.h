// Shared parts of linger's recurrent ops LSTMInt and GRUInt (shared/specs/linger.md section 4, decisions 11-13):
// attributes, the integer requantizations of the recurrence, the packed weight matrices with their projection
// (x · Wᵀ + bias brought to Q11), and the per-run buffers. Pure C++, no onnxruntime.
//
// Exactness: every intermediate is an int32. The Q11 projections are floor((sum + bias) * r + 1/2) saturated to
// int32, the gate sums are saturating int32 additions followed by saturation to int16 (so they are exact
// whenever the two Q11 terms fit in int32, which holds for any int8 model with |bias| < 2^30 and
// scale_x * scale_w >= 2^11, as in every linger export we have seen), the cell (LSTM) and the initial GRU hidden
// are kept in Q7 within +-2^24 (linger leaves them unbounded; see docs/ops.md).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/gemm/pack.h"

namespace ortquant::linger {

// Runs fn(task) for task in [0, n), possibly concurrently (the ORT adapter maps it onto the intra-op pool).
using RnnTaskFn = std::function<void(size_t)>;
using RnnParallel = std::function<void(size_t n, const RnnTaskFn& fn)>;
void rnn_run_inline(size_t n, const RnnTaskFn& fn);

// The attributes of one LSTMInt/GRUInt node.
struct RnnAttrs {
  int64_t hidden_size = 0;
  int64_t input_size = 0;
  bool batch_first = false;
  bool go_forward = true;
  double scale_i = 0, scale_h = 0, scale_iw = 0, scale_hw = 0;
  bool quantized_output = false;  // o_bits present: int8 output at scale_o
  double scale_o = 0;
  int o_bits = 8;
  int data_bits = 8;
};
// Throws Error naming the attribute if a scale is not finite and positive or a bit width is outside [2, 8].
void validate_rnn_attrs(const RnnAttrs& a);

// v -> floor(v * r + 1/2) for int32 v with the result saturated to int32; exact integer shifts when r = 2^k.
struct Requant32 {
  enum class Kind : uint8_t { kIdentity, kRight, kLeft, kGeneral };
  Kind kind = Kind::kIdentity;
  int shift = 0;  // kRight: floor(v / 2^shift + 1/2); kLeft: v * 2^shift (saturating)
  double ratio = 1.0;
  Requant32() = default;
  explicit Requant32(double r);
  int32_t apply(int32_t v) const;
};

// floor(v / 2^k + 1/2) for k >= 1 without overflow (what thinker's rounding shifts compute).
inline int32_t rshift_round(int32_t v, int k) { return (v >> k) + ((v >> (k - 1)) & 1); }
inline int32_t clamp_i32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
// a + b saturated to the int32 range.
inline int32_t add_sat32(int32_t a, int32_t b) {
  const int64_t s = int64_t(a) + int64_t(b);
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : static_cast<int32_t>(s));
}

// A weight matrix W[n][k] (int8, row j = output j) packed once for the int8 GEMM engine (core/gemm), and the
// projection   out[m][j] = sat_int32(floor((sum_k a[m][k] * W[j][k] + bias[j]) * ratio + 1/2)).
class RnnMatrix {
 public:
  // Rows of one activation tile of the engine (the per-step projection takes up to this many rows at once).
  static constexpr int64_t kTileRows = gemm::kMR;

  RnnMatrix() = default;
  RnnMatrix(const int8_t* w, int64_t n, int64_t k);
  int64_t n() const { return w_.n; }
  int64_t k() const { return w_.k; }
  // Any number of rows (the input projection of all time steps); bias may be null; threads through par.
  void project(const int8_t* a, int64_t m, int64_t lda, const int32_t* bias, double ratio, int32_t* out, int64_t ldc,
               const RnnParallel& par) const;
  // The per-step path without allocation: pack up to kTileRows rows into `tile` (tile_bytes() bytes, caller
  // owned), then project them on the calling thread.
  size_t tile_bytes() const { return static_cast<size_t>(w_.kgroups * kTileRows * 4); }
  void pack_tile(const int8_t* a, int64_t m, int64_t lda, uint8_t* tile) const;
  void project_tile(const uint8_t* tile, int64_t m, const int32_t* bias, double ratio, int32_t* out,
                    int64_t ldc) const;

 private:
  gemm::PackedWeights w_;
};

// What the recurrence computes, derived once from the attributes.
struct RnnPlan {
  RnnAttrs attrs;
  int gates = 4;          // 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n)
  double ratio_i = 1;     // input projection -> Q11: 2^11 / (scale_i * scale_iw)
  double ratio_h = 1;     // recurrent projection -> Q11: 2^11 / (scale_h * scale_hw)
  Requant32 out_q;        // Q14 hidden -> output int (o_bits) at scale_o: scale_o / 2^14
  Requant32 next_qh;      // what the next step multiplies: from the output int (scale_o) or Q14 to scale_h
  Requant32 next_h7;      // GRU: from the output int (scale_o) or Q14 to Q7
  int32_t out_lo = -128, out_hi = 127;  // o_bits range
  int32_t h_lo = -128, h_hi = 127;      // data_bits range of the quantized hidden
};
RnnPlan make_rnn_plan(const RnnAttrs& a, int gates);

// Weights of one node: W_ih [G*H, D], W_hh [G*H, H], biases [G*H] (zeros when absent).
struct RnnWeights {
  RnnMatrix w_ih, w_hh;
  std::vector<int32_t> b_ih, b_hh;
};
// Shapes are the caller's to check (the ORT adapter does, naming the inputs).
RnnWeights make_rnn_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                            const int32_t* b_hh);

// One run: x [T,B,D] ([B,T,D] with batch_first), optional per-sample lengths in [1, T] (null = all T), optional
// initial states [B,H] (h0, and c0 for LSTM). Outputs: y [t_out,B,H] ([B,t_out,H]) int8 or float32,
// t_out = max(lengths); hidden [B,H] and (LSTM) cell [B,H] float32.
struct RnnIo {
  const int8_t* x = nullptr;
  int64_t seq_len = 0, batch = 0;
  const int32_t* lengths = nullptr;
  const float* h0 = nullptr;
  const float* c0 = nullptr;
  void* y = nullptr;
  int64_t t_out = 0;
  float* hidden = nullptr;
  float* cell = nullptr;
};

}  // namespace ortquant::linger
