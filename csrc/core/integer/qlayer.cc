// Integer-mode layers: see qlayer.h.
#include "core/integer/qlayer.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/integer/qlayer_kernels.h"

namespace ortquant::integer {
namespace {

// Per-thread buffers of one run call (codes, padded codes, int32 sums): grown on demand, never shrunk.
template <class T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}
thread_local std::vector<int8_t> t_codes, t_padded;
thread_local std::vector<int32_t> t_acc;

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error("tensor size overflows int64");
  return r;
}

std::vector<int64_t> row_sums(const int8_t* w, int64_t n, int64_t k) {
  std::vector<int64_t> s(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) s[static_cast<size_t>(j)] += w[j * k + i];
  return s;
}

void check_channel_params(const std::vector<double>& s, const std::vector<double>& b, int64_t n) {
  if (static_cast<int64_t>(s.size()) != n || static_cast<int64_t>(b.size()) != n)
    throw Error("the per-channel scale and bias must have " + std::to_string(n) + " values, got " +
                std::to_string(s.size()) + " and " + std::to_string(b.size()));
  for (size_t j = 0; j < s.size(); ++j)
    if (!std::isfinite(s[j]) || !std::isfinite(b[j]))
      throw Error("the per-channel scale and bias must be finite (channel " + std::to_string(j) + ")");
}

}  // namespace

ActQuant make_act_quant(float scale, float zeropt, int64_t bits, bool is_signed, bool narrow, RoundMode mode,
                        bool bipolar) {
  if (!(std::isfinite(scale) && scale > 0.f))
    throw Error("the activation scale must be finite and positive, got " + std::to_string(scale));
  ActQuant a;
  a.scale = scale;
  a.mode = mode;
  if (bipolar || (is_signed && bits == 1)) {
    if (bipolar) zeropt = 0.f;
    if (zeropt != 0.f) throw Error("a signed 1-bit (bipolar) activation quantizer must have zero point 0");
    a.bipolar = true;
    a.zeropt = 0.f;
    a.lo = -1.f, a.hi = 1.f;
    return a;
  }
  if (bits < 1 || bits > 8) throw Error("the activation bit width must be 1 .. 8, got " + std::to_string(bits));
  if (!(std::isfinite(zeropt) && std::nearbyint(zeropt) == zeropt && std::fabs(zeropt) <= 65536.f))
    throw Error("the activation zero point must be an integer, got " + std::to_string(zeropt));
  int64_t lo, hi;
  if (is_signed) {
    lo = -(int64_t{1} << (bits - 1)) + (narrow ? 1 : 0);
    hi = (int64_t{1} << (bits - 1)) - 1;
  } else {
    lo = 0;
    hi = (int64_t{1} << bits) - 1 - (narrow ? 1 : 0);
  }
  if (hi < lo) throw Error("the activation quantizer has no level (unsigned narrow 1-bit)");
  a.zeropt = zeropt;
  a.lo = static_cast<float>(lo);
  a.hi = static_cast<float>(hi);
  const int64_t z = static_cast<int64_t>(zeropt);
  const int64_t vmin = lo - z, vmax = hi - z;
  a.offset = (vmin >= -128 && vmax <= 127) ? 0 : static_cast<int32_t>(vmin + 128);
  return a;
}

void quantize_codes(const ActQuant& a, const float* x, int8_t* codes, int64_t n) {
  select_isa(&scalar::quantize_codes_isa, &avx2::quantize_codes_isa, &avx512::quantize_codes_isa)(a, x, codes, n);
}

void rescale(const int32_t* acc, float* out, int64_t outer, int64_t channels, int64_t inner, const int64_t* corr,
             const double* s, const double* b, bool relu) {
  select_isa(&scalar::rescale_isa, &avx2::rescale_isa, &avx512::rescale_isa)(acc, out, outer, channels, inner, corr,
                                                                            s, b, relu);
}

void quantize_values(const ActQuant& a, const float* x, float* v, int64_t n) {
  select_isa(&scalar::quantize_values_isa, &avx2::quantize_values_isa, &avx512::quantize_values_isa)(a, x, v, n);
}

void rescale_f32(const float* acc, float* out, int64_t outer, int64_t channels, int64_t inner, const int64_t* corr,
                 const double* s, const double* b, bool relu) {
  select_isa(&scalar::rescale_f32_isa, &avx2::rescale_f32_isa, &avx512::rescale_f32_isa)(acc, out, outer, channels,
                                                                                        inner, corr, s, b, relu);
}

namespace {
// [min(vmin, 0), max(vmax, 0)]: every value a = q - z the layer's codes can stand for, padding (a = 0) included.
void value_span(const ActQuant& a, int64_t* lo0, int64_t* hi0) {
  // exact: lo, hi, zeropt are integers of magnitude <= 65536 + 255
  const int64_t vmin = a.bipolar ? -1 : static_cast<int64_t>(a.lo - a.zeropt);
  const int64_t vmax = a.bipolar ? 1 : static_cast<int64_t>(a.hi - a.zeropt);
  *lo0 = vmin < 0 ? vmin : 0;
  *hi0 = vmax > 0 ? vmax : 0;
}
}  // namespace

ActQuant nonneg_codes(ActQuant a) {
  int64_t lo0, hi0;
  value_span(a, &lo0, &hi0);
  if (hi0 - lo0 <= 127) a.offset = static_cast<int32_t>(lo0);
  return a;
}

int32_t nonneg_max(const ActQuant& a) {
  int64_t lo0, hi0;
  value_span(a, &lo0, &hi0);
  const int64_t smin = lo0 - a.offset, smax = hi0 - a.offset;  // the stored codes' range
  return (smin >= 0 && smax <= 127) ? static_cast<int32_t>(smax) : -1;
}

// ---- QConv -------------------------------------------------------------------------------------------------

namespace {
conv::ConvAttrs engine_attrs(conv::ConvAttrs a, bool explicit_pad) {
  if (explicit_pad) a.pt = a.pl = a.pb = a.pr = 0;
  return a;
}
bool needs_explicit_pad(const conv::ConvAttrs& a, const ActQuant& act) {
  return act.offset != 0 && (a.pt || a.pl || a.pb || a.pr);
}
}  // namespace

QConv::QConv(const int8_t* w, int64_t m, int64_t cg, const conv::ConvAttrs& a, const ActQuant& act,
             std::vector<double> s, std::vector<double> b, bool relu)
    : a_(a),
      explicit_pad_(needs_explicit_pad(a, nonneg_codes(act))),
      m_(m),
      cg_(cg),
      act_(nonneg_codes(act)),
      s_(std::move(s)),
      b_(std::move(b)),
      relu_(relu),
      conv_(w, m, cg, engine_attrs(a, explicit_pad_)) {
  check_channel_params(s_, b_, m);
  const int64_t k = checked_mul(checked_mul(cg, a.kh), a.kw);
  corr_ = row_sums(w, m, k);
  for (auto& c : corr_) c *= act_.offset;
}

Shape QConv::output_shape(const Shape& x) const {
  if (!explicit_pad_) return conv_.output_shape(x);
  if (x.size() != 4) throw Error("input must be 4-D [N, C, H, W], got shape " + shape_str(x));
  return conv_.output_shape({x[0], x[1], x[2] + a_.pt + a_.pb, x[3] + a_.pl + a_.pr});
}

void QConv::run(const float* x, const Shape& xs, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  const Shape os = output_shape(xs);
  const int64_t n_in = shape_size(xs), n_out = shape_size(os);
  int8_t* codes = scratch(t_codes, n_in);
  quantize_codes(act_, x, codes, n_in);
  const int8_t* engine_in = codes;
  Shape es = xs;
  if (explicit_pad_) {
    const int64_t h = xs[2], w = xs[3], hp = h + a_.pt + a_.pb, wp = w + a_.pl + a_.pr;
    const int64_t planes = checked_mul(xs[0], xs[1]);
    int8_t* padded = scratch(t_padded, checked_mul(planes, checked_mul(hp, wp)));
    const int8_t fill = static_cast<int8_t>(-act_.offset);
    for (int64_t p = 0; p < planes; ++p) {
      int8_t* dst = padded + p * hp * wp;
      const int8_t* src = codes + p * h * w;
      std::memset(dst, fill, static_cast<size_t>(a_.pt * wp));
      for (int64_t r = 0; r < h; ++r) {
        int8_t* row = dst + (r + a_.pt) * wp;
        std::memset(row, fill, static_cast<size_t>(a_.pl));
        std::memcpy(row + a_.pl, src + r * w, static_cast<size_t>(w));
        std::memset(row + a_.pl + w, fill, static_cast<size_t>(a_.pr));
      }
      std::memset(dst + (h + a_.pt) * wp, fill, static_cast<size_t>(a_.pb * wp));
    }
    engine_in = padded;
    es = {xs[0], xs[1], hp, wp};
  }
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = nonneg_max(act_);
  if (conv_.gemm_path()) {
    // Each image's sums are rescaled while they are in cache, straight from the engine's grid (no int32 output
    // tensor, no copy of the valid columns).
    const int64_t oh = os[2], ow = os[3], mg = m_ / a_.group;
    const auto grid_fn = select_isa(&scalar::rescale_grid_isa, &avx2::rescale_grid_isa, &avx512::rescale_grid_isa);
    conv_.run_raw(
        engine_in, es, ep,
        [&](int64_t b, int64_t g, const int32_t* sums, int64_t stride) {
          const int64_t j0 = g * mg;
          grid_fn(sums, stride, out + (b * m_ + j0) * oh * ow, mg, oh, ow, corr_.data() + j0, s_.data() + j0,
                  b_.data() + j0, relu_);
        },
        par, kernel);
    return;
  }
  int32_t* acc = scratch(t_acc, n_out);
  conv_.run(engine_in, es, ep, acc, par, kernel);
  rescale(acc, out, os[0], os[1], os[2] * os[3], corr_.data(), s_.data(), b_.data(), relu_);
}

// ---- QGemm -------------------------------------------------------------------------------------------------

QGemm::QGemm(const int8_t* w, int64_t n, int64_t k, const ActQuant& act, std::vector<double> s,
             std::vector<double> b, bool relu)
    : n_(n),
      k_(k),
      act_(nonneg_codes(act)),
      s_(std::move(s)),
      b_(std::move(b)),
      relu_(relu),
      packed_(gemm::pack_weights(w, n, k, k, gemm::PackedWeights::Layout::kPanels)) {
  check_channel_params(s_, b_, n);
  corr_ = row_sums(w, n, k);
  for (auto& c : corr_) c *= act_.offset;
}

void QGemm::run(const float* x, int64_t rows, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  const int64_t n_in = checked_mul(rows, k_), n_out = checked_mul(rows, n_);
  int8_t* codes = scratch(t_codes, n_in);
  quantize_codes(act_, x, codes, n_in);
  int32_t* acc = scratch(t_acc, n_out);
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = nonneg_max(act_);
  gemm::gemm_rows(codes, rows, k_, packed_, ep, acc, n_, par, kernel);
  rescale(acc, out, rows, n_, 1, corr_.data(), s_.data(), b_.data(), relu_);
}

}  // namespace ortquant::integer
