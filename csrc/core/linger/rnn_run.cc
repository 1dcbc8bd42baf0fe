#include "core/linger/rnn_run.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/isa.h"
#include "core/linger/rnn_cell_kernels.h"

namespace ortquant::linger {
namespace {

// Batch rows per recurrence task: one register tile of the GEMM engine, so a step reads W_hh once per group.
constexpr int64_t kRowsPerGroup = RnnMatrix::kTileRows;

// linger's float -> int: floor(float32(float32(v * scale) + 0.5)), saturated to [lo, hi] (v not NaN).
int32_t quant_float(float v, float scale, float lo, float hi) {
  float t = v * scale;
  t = t + 0.5f;
  t = std::floor(t);
  t = t < lo ? lo : (t > hi ? hi : t);
  return static_cast<int32_t>(t);
}

void check_no_nan(const float* v, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (std::isnan(v[i])) throw_error("input ", what, " contains NaN at element ", i);
}

constexpr float kStateLimit = 16777216.0f;  // 2^24: bound of the Q7 state taken from c0 (LSTM) / h0 (GRU)

}  // namespace

void run_rnn(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par) {
  const bool lstm = p.gates == 4;
  const RnnAttrs& a = p.attrs;
  const int64_t h = a.hidden_size, g = p.gates * h, t_len = io.seq_len, batch = io.batch;
  if (io.h0) check_no_nan(io.h0, batch * h, "h0");
  if (io.c0) check_no_nan(io.c0, batch * h, "c0");
  if (batch == 0 || t_len == 0) return;

  // 1. Input projection of every time step: gi[row][G*H] in Q11 (rows in x's own order).
  // (Not zero-initialized: the projection writes every element.)
  const std::unique_ptr<int32_t[]> gi(new int32_t[static_cast<size_t>(t_len * batch * g)]);
  w.w_ih.project(io.x, t_len * batch, a.input_size, w.b_ih.data(), p.ratio_i, gi.get(), g, par);

  const auto lstm_cell = select_isa(&scalar::lstm_cell_row, &avx2::lstm_cell_row, &avx512::lstm_cell_row);
  const auto gru_cell = select_isa(&scalar::gru_cell_row, &avx2::gru_cell_row, &avx512::gru_cell_row);
  const auto emit = select_isa(&scalar::rnn_emit_row, &avx2::rnn_emit_row, &avx512::rnn_emit_row);
  const GateTables& tables = gate_tables();
  const size_t y_elem = a.quantized_output ? 1 : sizeof(float);
  const float h_lo = static_cast<float>(p.h_lo), h_hi = static_cast<float>(p.h_hi);
  const float scale_h = static_cast<float>(a.scale_h);

  auto x_row = [&](int64_t t, int64_t b) { return a.batch_first ? b * t_len + t : t * batch + b; };
  auto y_row = [&](int64_t t, int64_t b) { return a.batch_first ? b * io.t_out + t : t * batch + b; };
  auto length = [&](int64_t b) { return io.lengths ? static_cast<int64_t>(io.lengths[b]) : t_len; };

  // 2. The recurrence, one task per group of batch rows (samples are independent).
  const int64_t groups = (batch + kRowsPerGroup - 1) / kRowsPerGroup;
  par(static_cast<size_t>(groups), [&](size_t task) {
    const int64_t b0 = batch * int64_t(task) / groups, b1 = batch * int64_t(task + 1) / groups, rows = b1 - b0;
    std::vector<int8_t> qh(static_cast<size_t>(rows * h), 0);
    std::vector<uint8_t> tile(w.w_hh.tile_bytes());
    std::vector<int32_t> gh(static_cast<size_t>(rows * g));
    std::vector<int32_t> state(static_cast<size_t>(rows * h), 0);  // LSTM: c7; GRU: h7
    std::vector<int32_t> c14(lstm ? static_cast<size_t>(rows * h) : 0, 0);
    std::vector<int32_t> h14(static_cast<size_t>(rows * h), 0);
    std::vector<int32_t> last(static_cast<size_t>(rows * h), 0);
    int64_t steps = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = b0 + r;
      steps = std::max(steps, length(b));
      for (int64_t j = 0; j < h; ++j) {
        const size_t k = static_cast<size_t>(r * h + j);
        if (io.h0) {
          qh[k] = static_cast<int8_t>(quant_float(io.h0[b * h + j], scale_h, h_lo, h_hi));
          if (!lstm) state[k] = quant_float(io.h0[b * h + j], 128.0f, -kStateLimit, kStateLimit);
        }
        if (lstm && io.c0) state[k] = quant_float(io.c0[b * h + j], 128.0f, -kStateLimit, kStateLimit);
      }
    }
    for (int64_t s = 0; s < steps; ++s) {
      w.w_hh.pack_tile(qh.data(), rows, h, tile.data());
      w.w_hh.project_tile(tile.data(), rows, w.b_hh.data(), p.ratio_h, gh.data(), g);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t b = b0 + r, n = length(b);
        if (s >= n) continue;
        const int64_t t = a.go_forward ? s : n - 1 - s;
        const size_t o = static_cast<size_t>(r * h);
        const int32_t* gir = gi.get() + x_row(t, b) * g;
        const int32_t* ghr = gh.data() + r * g;
        if (lstm) lstm_cell(gir, ghr, h, tables, &state[o], &c14[o], &h14[o]);
        else gru_cell(gir, ghr, h, tables, &state[o], &h14[o]);
        void* yr = static_cast<char*>(io.y) + static_cast<size_t>(y_row(t, b) * h) * y_elem;
        emit(p, &h14[o], h, yr, &qh[o], lstm ? nullptr : &state[o], &last[o]);
      }
    }
    // Outputs past each sample's length are 0 (pad_packed_sequence); final states from its last step.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = b0 + r;
      for (int64_t t = length(b); t < io.t_out; ++t)
        std::memset(static_cast<char*>(io.y) + static_cast<size_t>(y_row(t, b) * h) * y_elem, 0,
                    static_cast<size_t>(h) * y_elem);
      const int32_t* lr = &last[static_cast<size_t>(r * h)];
      float* hid = io.hidden + b * h;
      if (a.quantized_output) {
        const float so = static_cast<float>(a.scale_o);
        for (int64_t j = 0; j < h; ++j) hid[j] = static_cast<float>(lr[j]) / so;
      } else {
        for (int64_t j = 0; j < h; ++j) hid[j] = static_cast<float>(lr[j]) / 16384.0f;
      }
      if (lstm && io.cell) {
        const int32_t* cr = &c14[static_cast<size_t>(r * h)];
        for (int64_t j = 0; j < h; ++j) io.cell[b * h + j] = static_cast<float>(cr[j]) / 16384.0f;
      }
    }
  });
}

}  // namespace ortquant::linger
