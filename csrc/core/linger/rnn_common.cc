#include "core/linger/rnn_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/gemm/gemm.h"
#include "core/gemm/kernels.h"
#include "core/linger/rnn_cell_kernels.h"
#include "core/lut.h"

namespace ortquant::linger {

void rnn_run_inline(size_t n, const RnnTaskFn& fn) {
  for (size_t i = 0; i < n; ++i) fn(i);
}

namespace {

void check_scale(const char* name, double s) {
  if (!(s > 0.0) || !std::isfinite(s)) throw_error("attribute '", name, "' must be a finite positive scale, got ", s);
}

// Exponent e with x == 2^e exactly, or false.
bool pow2_exponent(double x, int* e) {
  if (!(x > 0.0) || !std::isfinite(x)) return false;
  int ex = 0;
  if (std::frexp(x, &ex) != 0.5) return false;
  *e = ex - 1;
  return true;
}

int32_t sat_i32(double q) {
  if (q >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (q <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(q);
}

}  // namespace

void validate_rnn_attrs(const RnnAttrs& a) {
  if (a.hidden_size < 1) throw_error("attribute 'hidden_size' must be positive, got ", a.hidden_size);
  check_scale("scale_i", a.scale_i);
  check_scale("scale_h", a.scale_h);
  check_scale("scale_iw", a.scale_iw);
  check_scale("scale_hw", a.scale_hw);
  if (a.quantized_output) {
    check_scale("scale_o", a.scale_o);
    if (a.o_bits < 2 || a.o_bits > 8)
      throw_error("attribute 'o_bits' must be between 2 and 8 (int8 output), got ", a.o_bits);
  }
  if (a.data_bits < 2 || a.data_bits > 8)
    throw_error("attribute 'data_bits' must be between 2 and 8 (int8 input), got ", a.data_bits);
}

Requant32::Requant32(double r) : ratio(r) {
  int e = 0;
  if (!pow2_exponent(r, &e) || e < -31 || e > 31) {
    kind = Kind::kGeneral;
  } else if (e == 0) {
    kind = Kind::kIdentity;
  } else if (e < 0) {
    kind = Kind::kRight;
    shift = -e;
  } else {
    kind = Kind::kLeft;
    shift = e;
  }
}

int32_t Requant32::apply(int32_t v) const {
  switch (kind) {
    case Kind::kIdentity: return v;
    case Kind::kRight: return rshift_round(v, shift);
    case Kind::kLeft: {
      const int64_t w = int64_t(v) * (int64_t(1) << shift);
      return w > INT32_MAX ? INT32_MAX : (w < INT32_MIN ? INT32_MIN : static_cast<int32_t>(w));
    }
    case Kind::kGeneral: break;
  }
  return sat_i32(std::floor(static_cast<double>(v) * ratio + 0.5));
}

RnnMatrix::RnnMatrix(const int8_t* w, int64_t n, int64_t k)
    : w_(gemm::pack_weights(w, n, k, k, gemm::PackedWeights::Layout::kPanels)) {}

namespace {

gemm::Epilogue q11_epilogue(const int32_t* bias, double ratio) {
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kInt32;
  ep.ratio = ratio;
  ep.lo = -2147483648.0;
  ep.hi = 2147483647.0;
  ep.bias = bias;
  return ep;
}

gemm::TileFn row_tile_fn() {
  switch (gemm::resolve_kernel(gemm::Kernel::kAuto)) {
    case gemm::Kernel::kAvx512Vnni: return &gemm::avx512vnni::tile_rows;
    case gemm::Kernel::kAvxVnni: return &gemm::avxvnni::tile_rows;
    case gemm::Kernel::kAvx2: return &gemm::avx2::tile_rows;
    default: return &gemm::scalar::tile_rows;
  }
}

}  // namespace

void RnnMatrix::project(const int8_t* a, int64_t m, int64_t lda, const int32_t* bias, double ratio, int32_t* out,
                        int64_t ldc, const RnnParallel& par) const {
  gemm::gemm_rows(a, m, lda, w_, q11_epilogue(bias, ratio), out, ldc, par);
}

void RnnMatrix::pack_tile(const int8_t* a, int64_t m, int64_t lda, uint8_t* tile) const {
  gemm::pack_rows_tile(a, m, lda, w_.k, 0, tile);
}

void RnnMatrix::project_tile(const uint8_t* tile, int64_t m, const int32_t* bias, double ratio, int32_t* out,
                             int64_t ldc) const {
  const gemm::Epilogue ep = q11_epilogue(bias, ratio);
  const gemm::TileFn fn = row_tile_fn();
  gemm::TileArgs t;
  t.a = tile;
  t.kgroups = w_.kgroups;
  t.mr = static_cast<int>(m);
  t.ep = &ep;
  t.ldc = ldc;
  // The exact product without widening where the weights allow it (as gemm_rows does): no -128 weight (vpsignb), or
  // every |w| <= 64 (the biased bytes as they are). Weights with -128 wider than that keep the widening kernel.
  t.no_min = w_.no_min;
  t.biased_flush = gemm::biased_flush(w_);
  const int64_t kg = w_.kgroups;
  for (int64_t p = 0; p < w_.blocks(); ++p) {
    const int64_t j0 = p * gemm::kPanel;
    t.b = w_.data.data() + p * kg * gemm::kPanel * 4;
    t.nr = static_cast<int>(std::min<int64_t>(gemm::kPanel, w_.n - j0));
    t.corr = w_.corr.data() + j0;
    t.bias = bias ? bias + j0 : nullptr;
    t.out = out + j0;
    fn(t);
  }
}

const GateTables& gate_tables() {
  // Copies of the luna tables with 4 bytes of zero padding after each, so 32-bit gathers at any index stay inside.
  struct Padded {
    int8_t sig[65536 + 4] = {};
    int8_t tanh[65536 + 4] = {};
    GateTables view{};
    Padded() {
      std::memcpy(sig, luna::sigmoid_table(), 65536);
      std::memcpy(tanh, luna::tanh_table(), 65536);
      view = GateTables{sig + 32768, tanh + 32768};
    }
  };
  static const Padded padded;
  return padded.view;
}

RnnPlan make_rnn_plan(const RnnAttrs& a, int gates) {
  validate_rnn_attrs(a);
  RnnPlan p;
  p.attrs = a;
  p.gates = gates;
  p.ratio_i = 2048.0 / (a.scale_i * a.scale_iw);
  p.ratio_h = 2048.0 / (a.scale_h * a.scale_hw);
  p.h_lo = -(1 << (a.data_bits - 1));
  p.h_hi = (1 << (a.data_bits - 1)) - 1;
  if (a.quantized_output) {
    p.out_lo = -(1 << (a.o_bits - 1));
    p.out_hi = (1 << (a.o_bits - 1)) - 1;
    p.out_q = Requant32(a.scale_o / 16384.0);
    p.next_qh = Requant32(a.scale_h / a.scale_o);
    p.next_h7 = Requant32(128.0 / a.scale_o);
  } else {
    p.next_qh = Requant32(a.scale_h / 16384.0);
    p.next_h7 = Requant32(1.0 / 128.0);
  }
  if (!std::isfinite(p.ratio_i) || !std::isfinite(p.ratio_h) || !(p.ratio_i > 0) || !(p.ratio_h > 0))
    throw_error("scale_i * scale_iw and scale_h * scale_hw must be finite and positive");
  return p;
}

RnnWeights make_rnn_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                            const int32_t* b_hh) {
  const int64_t h = p.attrs.hidden_size, g = p.gates * h;
  RnnWeights w;
  w.w_ih = RnnMatrix(w_ih, g, p.attrs.input_size);
  w.w_hh = RnnMatrix(w_hh, g, h);
  w.b_ih = b_ih ? std::vector<int32_t>(b_ih, b_ih + g) : std::vector<int32_t>(size_t(g), 0);
  w.b_hh = b_hh ? std::vector<int32_t>(b_hh, b_hh + g) : std::vector<int32_t>(size_t(g), 0);
  return w;
}

}  // namespace ortquant::linger
