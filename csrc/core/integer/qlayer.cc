// Integer-mode layers: see qlayer.h.
#include "core/integer/qlayer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "core/checked.h"
#include "core/error.h"
#include "core/integer/qlayer_kernels.h"
#include "core/integer/residual.h"

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
thread_local std::vector<float> t_outf;  // QConv::run: float32 outputs of a whole-output path, before codes
thread_local std::vector<uint8_t> t_signs;
thread_local std::vector<uint64_t> t_bits;
// QConv::run_bands: a band's int32 sums take about kBandAccBytes (kept in L2 for the rescale); outputs of at most
// kBandMinBytes of sums run whole.
constexpr int64_t kBandAccBytes = 128 << 10, kBandMinBytes = 1 << 20;
// rescale_codes: channels of fewer values than this (a small image's planes) take the exact formula for all channels
// at once instead of the vector loop channel by channel.
constexpr int64_t kSmallPlane = 64;
// QConv::batch_tasks: a batch is split into ranges of images of at least this many multiply-adds each (a range is
// one call of the layer's whole path, about 40 us of work on an AVX2 core). Waking a pool thread that does not spin
// costs tens of microseconds on the VMs measured: mixed_bits at batch 8 on two such threads took 15-35 % longer
// with ranges of 2^20-2^21 multiply-adds than unsplit, and a call per image cost 1-3 % on one thread.
constexpr int64_t kBatchTaskMacs = int64_t{1} << 22;
// QConv::emit_channels: a task rescales at least this many sums (a smaller output is one task: a task costs about
// what rescaling a few hundred sums does).
constexpr int64_t kEmitTaskValues = int64_t{1} << 15;
// A channels-last float32 output of at least this many values per image (1 MiB, a core's L2 here) is streamed to
// memory (store_channels_last_isa's non-temporal stores).
constexpr int64_t kStreamFloats = int64_t{1} << 18;
// QConv's w_shift: at most the span of 16-bit weight codes.
constexpr int64_t kMaxWeightShift = int64_t{1} << 16;

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

// QConv's and QGemm's w_shift (one value per weight row, or empty): false when there is none (empty or all 0);
// else validates it and sets corr (row sums) and bound (128 * sum |w|, which must stay below 2^31) of the weights
// w[j][i] + shift[j].
bool apply_weight_shift(const int8_t* w, int64_t n, int64_t k, const ActQuant& act, const std::vector<int32_t>& shift,
                        std::vector<int64_t>* corr, std::vector<int64_t>* bound) {
  if (std::all_of(shift.begin(), shift.end(), [](int32_t d) { return d == 0; })) return false;
  if (static_cast<int64_t>(shift.size()) != n)
    throw Error("w_shift must have one value per output channel (" + std::to_string(n) + "), got " +
                std::to_string(shift.size()));
  if (act.wide) throw Error("w_shift takes an activation quantizer of at most 8 bits (int8 codes)");
  for (int64_t j = 0; j < n; ++j) {
    const int64_t d = shift[static_cast<size_t>(j)];
    if (d < -kMaxWeightShift || d > kMaxWeightShift)
      throw Error("w_shift[" + std::to_string(j) + "] = " + std::to_string(d) + " is outside [-" +
                  std::to_string(kMaxWeightShift) + ", " + std::to_string(kMaxWeightShift) + "]");
    int64_t sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t v = int64_t{w[j * k + i]} + d;
      sum += v;
      abs_sum += v < 0 ? -v : v;
      if (abs_sum >= (int64_t{1} << 31) / 128)  // 128 * sum |w| must stay below 2^31
        throw Error("output channel " + std::to_string(j) + ": the weights w + w_shift sum to more than 2^24 - 1 "
                    "in magnitude, so the layer's int32 sums could overflow");
    }
    (*corr)[static_cast<size_t>(j)] = sum;
    (*bound)[static_cast<size_t>(j)] = 128 * abs_sum;
  }
  return true;
}

// sum_k |w[j * k + i]| * 128 per row j: a bound on |acc_j|, the engine's sum of stored int8 codes times weights.
std::vector<int64_t> acc_bounds(const int8_t* w, int64_t n, int64_t k) {
  std::vector<int64_t> s(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    int64_t t = 0;
    for (int64_t i = 0; i < k; ++i) t += w[j * k + i] < 0 ? -int64_t{w[j * k + i]} : int64_t{w[j * k + i]};
    s[static_cast<size_t>(j)] = checked_mul(t, 128);
  }
  return s;
}

// The exponent of the lowest set bit of finite x != 0: x is an odd integer times 2^lowest_bit(x).
int lowest_bit(double x) {
  int e;
  const double m = std::frexp(std::fabs(x), &e);  // x = m 2^e, m in [0.5, 1)
  const auto bits = static_cast<uint64_t>(std::ldexp(m, 53));  // the 53-bit significand, exactly
  return e - 53 + __builtin_ctzll(bits);
}

// Whether every value of one side of the channel is exact in both computations (codes_fast_coeffs): S a power of
// two 2^k; y = V * s + b (V = acc + corr) exact in float32, a multiple of 2^g0 (g0: the lowest bit of s and b) below
// 2^(23 + g0); for the LeakyRelu's side (alpha != 1) alpha * y also exact, a multiple of 2^g (g = g0 + the lowest bit
// of alpha) below 2^(23 + g); so / S and + z exact (multiples of 2^min(g - k, 0) below 2^(23 + min(g - k, 0))); the
// side's a and c (CodesFast) exact in float32 and fma(acc, a, c) exact (multiples of 2^h, h = min(g - k, -1), below
// 2^(23 + h)). Then the reference's value and u are both the side's q + shift exactly.
bool exact_side(const ActQuant& q, double s, double b, int64_t corr, int64_t bound, double alpha, float a, float a_lo,
                float c, float c_lo) {
  int k;
  if (std::frexp(q.scale, &k) != 0.5 || s == 0.0 || alpha == 0.0 || a_lo != 0.f || c_lo != 0.f ||
      bound >= (int64_t{1} << 24))
    return false;
  k -= 1;  // S = 2^k
  const int g0 = b == 0.0 ? lowest_bit(s) : std::min(lowest_bit(s), lowest_bit(b));
  const double m0 = (static_cast<double>(bound) + std::fabs(static_cast<double>(corr))) * std::fabs(s) + std::fabs(b);
  if (g0 < -200 || g0 > 100 || !(m0 < std::ldexp(1.0, 23 + g0))) return false;
  const int g = alpha == 1.0 ? g0 : g0 + lowest_bit(alpha);
  const double m = std::fabs(alpha) * m0;
  if (g - k < -100 || !(m < std::ldexp(1.0, 23 + g))) return false;
  const int h0 = std::min(g - k, 0), h = std::min(g - k, -1);
  return m / q.scale + std::fabs(q.zeropt) < std::ldexp(1.0, 23 + h0) &&
         static_cast<double>(bound) * std::fabs(static_cast<double>(a)) + std::fabs(static_cast<double>(c)) + 1.0 <
             std::ldexp(1.0, 23 + h);
}

// rescale_codes_isa's coefficients of one channel (CodesFast), for the quantizer q of the values
// y = float32(double(acc + corr) * s + b), |acc| <= bound. The real value the quantizer rounds is
// Q = (acc + corr) * s / S + b / S + z (S = q.scale); with shift, Q + shift = acc * a + c for a = s / S and
// c = (corr * s + b) / S + z + shift. The reference's value differs from Q by its three float32 roundings (y, y / S,
// + z: 2^-24 of |Y| = |Q - z|, |Y| and |Q|) and its float64 ones (2^-52 of |c0| + |c1| + A, c0 = corr * s / S,
// c1 = b / S, A = bound |a|). The vector loop's u differs from Q + shift by 2^-24 of 2 |u| (the two roundings after
// the exact products, acc exact in float32 below 2^24, else 2^-24 A more) and 2^-46 (A + |c|) (the split
// coefficients' remainders). Where it matters, floor(u) in [lo - 1, hi], |u| and |Q| are at most
// U = max(|lo|, |hi|) + 2 and |Y| at most U + |z|; the sum is below 2^-21 (U + |z| + 1) + 2^-45 (A + |c| + |c0| + |c1|)
// (+ 2^-23 A). e is twice that, plus 2^-22 for u - floor(u) in float32. The modes whose boundaries depend on the sign
// (toward zero, away from zero, QONNX UP) get e = 2: every value takes the exact formula. fast_side computes one
// side: the coefficients of k * Q + shift (k = 1, or the LeakyRelu's alpha for the values below 0) and their bound e;
// false where the vector loop cannot take them.
bool fast_side(const ActQuant& q, double s, double b, int64_t corr, int64_t bound, double k, double shift, float* a_hi,
               float* a_lo, float* c_hi, float* c_lo, float* e_out) {
  const double S = q.scale, z = q.zeropt;
  const double a = k * s / S, c0 = k * static_cast<double>(corr) * s / S, c1 = k * b / S, c = c0 + c1 + z + shift;
  const double A = static_cast<double>(bound) * std::fabs(a);
  if (!std::isfinite(a) || !std::isfinite(c) || !(A + std::fabs(c) < 0x1p22)) return false;
  const double U = std::max(std::fabs(q.lo), std::fabs(q.hi)) + 2.0;
  double e = 0x1p-20 * (U + std::fabs(z) + 1.0) + 0x1p-44 * (A + std::fabs(c) + std::fabs(c0) + std::fabs(c1)) +
             0x1p-22;
  if (bound >= (int64_t{1} << 24)) e += 0x1p-22 * A;
  if (!(e < 0.25)) return false;
  *a_hi = static_cast<float>(a);
  *a_lo = static_cast<float>(a - static_cast<double>(*a_hi));
  *c_hi = static_cast<float>(c);
  *c_lo = static_cast<float>(c - static_cast<double>(*c_hi));
  *e_out = static_cast<float>(e);
  return true;
}

CodesFast codes_fast_coeffs(const ActQuant& q, double s, double b, int64_t corr, int64_t bound,
                            std::optional<float> leaky) {
  CodesFast f;
  double shift;
  CodesFast::Tie tie = CodesFast::kNone;  // what an exact channel does on a boundary
  uint8_t exact = 0;                      // CodesFast::exact: the modes an exact channel rounds by itself
  switch (q.mode) {
    case RoundMode::kFloor: shift = 0.0, exact = 2; break;
    case RoundMode::kCeil: shift = 1.0, tie = CodesFast::kDown, exact = 3; break;
    case RoundMode::kHalfEven: shift = 0.5, tie = CodesFast::kEven, exact = 1; break;
    case RoundMode::kHalfAway: case RoundMode::kQonnxHalfUp: shift = 0.5, tie = CodesFast::kAway; break;
    case RoundMode::kHalfTowardZero: case RoundMode::kQonnxHalfDown: shift = 0.5, tie = CodesFast::kTowardZero; break;
    case RoundMode::kHalfUp: shift = 0.5, exact = 4; break;
    case RoundMode::kHalfDown: shift = 0.5, tie = CodesFast::kDown, exact = 5; break;
    default: return f;
  }
  if (q.bipolar || q.wide) return f;
  CodesFast t;
  if (!fast_side(q, s, b, corr, bound, 1.0, shift, &t.a, &t.a_lo, &t.c, &t.c_lo, &t.e)) return f;
  if (leaky && !fast_side(q, s, b, corr, bound, static_cast<double>(*leaky), shift, &t.n_a, &t.n_a_lo, &t.n_c,
                          &t.n_c_lo, &t.n_e))
    return f;
  t.relu_at = static_cast<float>(static_cast<double>(q.zeropt) + shift);
  t.e_r = t.e;
  if (exact_side(q, s, b, corr, bound, 1.0, t.a, t.a_lo, t.c, t.c_lo)) {
    t.e = 0.f, t.tie = tie;
    t.cq = static_cast<float>(static_cast<double>(t.c) - shift);  // exact: a multiple of 2^-1 below 2^22
    const bool neg_exact =
        leaky && exact_side(q, s, b, corr, bound, static_cast<double>(*leaky), t.n_a, t.n_a_lo, t.n_c, t.n_c_lo);
    if (neg_exact) t.n_e = 0.f, t.n_cq = static_cast<float>(static_cast<double>(t.n_c) - shift);
    if (!leaky || neg_exact) t.exact = exact;
  }
  return t;
}

void check_channel_params(const std::vector<double>& s, const std::vector<double>& b, int64_t n) {
  if (static_cast<int64_t>(s.size()) != n || static_cast<int64_t>(b.size()) != n)
    throw Error("the per-channel scale and bias must have " + std::to_string(n) + " values, got " +
                std::to_string(s.size()) + " and " + std::to_string(b.size()));
  for (size_t j = 0; j < s.size(); ++j)
    if (!std::isfinite(s[j]) || !std::isfinite(b[j]))
      throw Error("the per-channel scale and bias must be finite (channel " + std::to_string(j) + ")");
}

// The bit-kernel weights of a layer with (nonneg_codes) activation `act` and weight codes w [n][channels][taps],
// when every code is +-1, the activation is bipolar (*planes = 0: XNOR-popcount) or its stored codes are in
// [0, 3] (*planes = 1 or 2: bit-serial), and the reduction is within the engine's limit (xnor.h).
std::optional<XnorWeights> bit_weights(const ActQuant& act, const int8_t* w, int64_t n, int64_t groups,
                                       int64_t channels, int64_t taps, int* planes) {
  const int64_t k = checked_mul(channels, taps);
  // The engine's reduction limit (the engine path would refuse a longer one; it also bounds the per-pixel gather).
  if (k > gemm::kMaxK) return std::nullopt;
  const int32_t x_max = act.bipolar ? -1 : nonneg_max(act);
  if (!act.bipolar && (x_max < 0 || x_max > 3)) return std::nullopt;
  if (!all_unit_codes(w, checked_mul(n, k))) return std::nullopt;
  *planes = act.bipolar ? 0 : (x_max <= 1 ? 1 : 2);
  return pack_xnor_weights(w, n, groups, channels, taps);
}

// Splits `units` units of work into tasks of at least `min_units` units (at most 64 tasks; the pool balances them
// over its threads) and runs fn(u0, u1) on each range; one task runs inline.
template <class F>
void parallel_ranges(const gemm::Parallel& par, int64_t units, int64_t min_units, F fn) {
  int64_t tasks = units / (min_units > 0 ? min_units : 1);
  tasks = tasks < 1 ? 1 : (tasks > 64 ? 64 : tasks);
  if (tasks == 1) return fn(int64_t{0}, units);
  const int64_t per = (units + tasks - 1) / tasks;
  par(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t u0 = static_cast<int64_t>(t) * per, u1 = u0 + per < units ? u0 + per : units;
    if (u0 < u1) fn(u0, u1);
  });
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
  if (bits < 1 || bits > 24) throw Error("the activation bit width must be 1 .. 24, got " + std::to_string(bits));
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
  if (bits <= 8) {
    a.offset = (vmin >= -128 && vmax <= 127) ? 0 : static_cast<int32_t>(vmin + 128);
    return a;
  }
  // Byte planes (ActQuant::wide), two for 9 to 16 bits, three for 17 to 24: every stored value c = a - offset, the
  // padding's a = 0 included, must lie in [-half, half - 1], half = 2^15 or 2^23.
  const int planes = bits <= 16 ? 2 : 3;
  const int64_t half = int64_t{1} << (8 * planes - 1);
  const int64_t lo0 = std::min<int64_t>(vmin, 0), hi0 = std::max<int64_t>(vmax, 0);
  if (hi0 - lo0 > 2 * half - 1)
    throw Error("the " + std::to_string(bits) + "-bit activation's values q - z in [" + std::to_string(vmin) + ", " +
                std::to_string(vmax) + "] and 0 span " + std::to_string(hi0 - lo0 + 1) +
                " levels; integer mode takes at most " + std::to_string(2 * half) +
                " (a zero point inside the quantizer's range)");
  a.wide = true;
  a.planes = planes;
  a.offset = (lo0 >= -half && hi0 <= half - 1) ? 0 : static_cast<int32_t>(lo0 + half);
  return a;
}

void quantize_codes(const ActQuant& a, const float* x, int8_t* codes, int64_t n) {
  if (a.wide) throw Error("a 9- to 24-bit activation quantizer has no int8 codes (it runs on byte planes)");
  select_isa(&scalar::quantize_codes_isa, &avx2::quantize_codes_isa, &avx512::quantize_codes_isa)(a, x, codes, n);
}

void dequantize_codes(const ActQuant& a, const int8_t* codes, float* y, int64_t n) {
  if (a.wide) throw Error("a 9- to 24-bit activation quantizer has no int8 codes");
  select_isa(&scalar::dequantize_codes_isa, &avx2::dequantize_codes_isa, &avx512::dequantize_codes_isa)(
      codes, a.offset, a.scale, y, n);
}

void map_codes(const int8_t* table, int8_t* codes, int64_t n, bool small) {
  if (small) {
    select_isa(&scalar::map_codes16_isa, &avx2::map_codes16_isa, &avx512::map_codes16_isa)(table + 128, codes, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) codes[i] = table[static_cast<uint8_t>(codes[i]) ^ 0x80u];
}

void rescale(const int32_t* acc, float* out, int64_t outer, int64_t channels, int64_t inner, const int64_t* corr,
             const double* s, const double* b, bool relu) {
  select_isa(&scalar::rescale_isa, &avx2::rescale_isa, &avx512::rescale_isa)(acc, out, outer, channels, inner, corr,
                                                                            s, b, relu);
}

void quantize_wide(const ActQuant& a, const float* x, int8_t* planes, int64_t n) {
  if (!a.wide) throw Error("quantize_wide needs a 9- to 24-bit activation quantizer");
  select_isa(&scalar::quantize_wide_isa, &avx2::quantize_wide_isa, &avx512::quantize_wide_isa)(a, x, planes, n);
}

void rescale_wide(const int32_t* acc, int nplanes, int64_t plane_stride, float* out, int64_t outer, int64_t channels,
                  int64_t inner, const int64_t* corr, const double* s, const double* b, bool relu) {
  if (nplanes != 2 && nplanes != 3) throw Error("rescale_wide takes 2 or 3 byte planes");
  select_isa(&scalar::rescale_wide_isa, &avx2::rescale_wide_isa, &avx512::rescale_wide_isa)(
      acc, nplanes, plane_stride, out, outer, channels, inner, corr, s, b, relu);
}

std::vector<Exact32> exact32_coeffs(const int64_t* corr, const double* s, const double* b, const int64_t* bound,
                                    int64_t n) {
  std::vector<Exact32> out(static_cast<size_t>(n));
  constexpr int64_t kLim = int64_t{1} << 24;
  const double fmin = std::numeric_limits<float>::min(), fmax = std::numeric_limits<float>::max();
  for (int64_t j = 0; j < n; ++j) {
    const double sj = s[j], bj = b[j];
    const int64_t cj = corr[j];
    int e = 0;
    if (!(std::isfinite(sj) && sj >= fmin && sj <= fmax && std::frexp(sj, &e) == 0.5)) continue;  // a power of two
    if (!(std::isfinite(bj) && std::fabs(bj) <= fmax && static_cast<double>(static_cast<float>(bj)) == bj)) continue;
    if (cj < -kLim || cj > kLim || bound[j] < 0 || bound[j] > kLim - (cj < 0 ? -cj : cj)) continue;
    // Every value v * S + B is a multiple of g (S, and the last bit of B's 24-bit significand) and at most m in
    // magnitude: float64 holds it exactly when m / g < 2^53 (2^52 here: m itself may be rounded up or down).
    double g = sj;
    if (bj != 0.0) {
      int eb = 0;
      std::frexp(bj, &eb);
      g = std::min(g, std::ldexp(1.0, std::max(eb - 24, -149)));
    }
    if (g < fmin) continue;  // a subnormal result possible
    const double m = static_cast<double>(bound[j] + (cj < 0 ? -cj : cj)) * sj + std::fabs(bj);
    if (!(m / g < 0x1p52)) continue;
    out[static_cast<size_t>(j)] = {static_cast<float>(sj), static_cast<float>(bj), static_cast<int32_t>(cj), true};
  }
  return out;
}

void rescale_rows_exact32(const int32_t* acc, float* out, int64_t rows, int64_t n, const int32_t* c, const float* s,
                          const float* b, bool relu) {
  select_isa(&scalar::rescale_rows_exact32_isa, &avx2::rescale_rows_exact32_isa, &avx512::rescale_rows_exact32_isa)(
      acc, out, rows, n, c, s, b, relu);
}

int64_t off_grid(const ActQuant& a, const float* x, int64_t n) {
  const double s = a.scale, z = a.zeropt;
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(x[i]) / s + z;
    if (!std::isfinite(t)) return i;
    const double q = a.bipolar ? (t >= 0 ? 1.0 : -1.0) : std::nearbyint(t);
    if (std::fabs(t - q) > kGridTolerance || q < a.lo || q > a.hi) return i;
  }
  return -1;
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
  // exact: lo, hi, zeropt are integers of magnitude <= 65536, their difference below 2^24
  const int64_t vmin = a.bipolar ? -1 : static_cast<int64_t>(a.lo - a.zeropt);
  const int64_t vmax = a.bipolar ? 1 : static_cast<int64_t>(a.hi - a.zeropt);
  *lo0 = vmin < 0 ? vmin : 0;
  *hi0 = vmax > 0 ? vmax : 0;
}
}  // namespace

ActQuant nonneg_codes(ActQuant a) {
  if (a.wide) return a;
  int64_t lo0, hi0;
  value_span(a, &lo0, &hi0);
  if (hi0 - lo0 <= 127) a.offset = static_cast<int32_t>(lo0);
  return a;
}

int32_t nonneg_max(const ActQuant& a) {
  if (a.wide) return -1;
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
// A wide quantizer's padding is never the engine's zero code (its low plane stores l - 128). A depthwise layer
// (cg == 1) whose padding code -offset lies in [0, 127] keeps the engine's pads instead: its border sums are
// corrected (Conv2d::add_pad_sums), which costs a few outputs per row instead of a padded copy of the input.
bool needs_explicit_pad(const conv::ConvAttrs& a, const ActQuant& act, int64_t cg) {
  if (cg == 1 && !act.wide && act.offset <= 0 && act.offset >= -127) return false;
  return (act.offset != 0 || act.wide) && (a.pt || a.pl || a.pb || a.pr);
}
// The padded copy of `planes` code planes [h][w]: [planes][h + pt + pb][w + pl + pr], the border filled with `fill`.
void pad_codes(const int8_t* codes, int64_t planes, int64_t h, int64_t w, const conv::ConvAttrs& a, int8_t fill,
               int8_t* padded) {
  const int64_t hp = h + a.pt + a.pb, wp = w + a.pl + a.pr;
  for (int64_t p = 0; p < planes; ++p) {
    int8_t* dst = padded + p * hp * wp;
    const int8_t* src = codes + p * h * w;
    std::memset(dst, fill, static_cast<size_t>(a.pt * wp));
    for (int64_t r = 0; r < h; ++r) {
      int8_t* row = dst + (r + a.pt) * wp;
      std::memset(row, fill, static_cast<size_t>(a.pl));
      std::memcpy(row + a.pl, src + r * w, static_cast<size_t>(w));
      std::memset(row + a.pl + w, fill, static_cast<size_t>(a.pr));
    }
    std::memset(dst + (h + a.pt) * wp, fill, static_cast<size_t>(a.pb * wp));
  }
}
}  // namespace

QConv::QConv(const int8_t* w, int64_t m, int64_t cg, const conv::ConvAttrs& a, const ActQuant& act,
             std::vector<double> s, std::vector<double> b, bool relu, bool xnor, std::vector<int32_t> w_shift)
    : a_(a),
      explicit_pad_(needs_explicit_pad(a, nonneg_codes(act), cg)),
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
  acc_bound_ = acc_bounds(w, m, k);
  if (apply_weight_shift(w, m, k, act_, w_shift, &corr_, &acc_bound_)) {
    shift_ = std::move(w_shift);
    xnor = false;  // the bit kernels take weights of -1 and +1, not shifted ones
  }
  for (auto& c : corr_) c *= int64_t{act_.offset} + wide_lift(act_);
  // byte planes (wide) combine their sums in float64 themselves: no float32 rescale
  exact32_ = act_.wide ? std::vector<Exact32>(static_cast<size_t>(m))
                       : exact32_coeffs(corr_.data(), s_.data(), b_.data(), acc_bound_.data(), m);
  any_exact32_ = std::any_of(exact32_.begin(), exact32_.end(), [](const Exact32& e) { return e.ok; });
  if (a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.group == 1 && cg <= kSmallK && !act_.wide &&
      a.pt == 0 && a.pl == 0 && a.pb == 0 && a.pr == 0)
    small_w_.assign(w, w + m * cg);
  if (xnor && !act_.wide) xnor_ = bit_weights(act_, w, m, a.group, cg, a.kh * a.kw, &planes_);
  if (xnor_ && planes_ == 0) zero_corr_.assign(static_cast<size_t>(m), 0);
  if (xnor_ && planes_ > 0) {  // the padding code -offset (a = 0) as bit planes over the group's channels
    const int64_t words = xnor_->words;
    pad_planes_.assign(static_cast<size_t>(planes_ * words), 0);
    for (int bit = 0; bit < planes_; ++bit)
      if ((-act_.offset >> bit) & 1)
        for (int64_t c = 0; c < cg; ++c)
          pad_planes_[static_cast<size_t>(bit * words + c / 64)] |= uint64_t{1} << (c % 64);
  }
}

Shape QConv::output_shape(const Shape& x) const {
  if (!explicit_pad_) return conv_.output_shape(x);
  if (x.size() != 4) throw Error("input must be 4-D [N, C, H, W], got shape " + shape_str(x));
  return conv_.output_shape({x[0], x[1], x[2] + a_.pt + a_.pb, x[3] + a_.pl + a_.pr});
}

void QConv::run_xnor(const float* x, const Shape& xs, const Shape& os, float* out,
                     const gemm::Parallel& par) const {
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], g = a_.group, oh = os[2], ow = os[3];
  const int64_t hw = checked_mul(h, w), ohw = checked_mul(oh, ow), words = xnor_->words, mg = m_ / g;
  // Bits [n][g][h * w][words]: each image and group's channels packed per pixel.
  uint64_t* bits = scratch(t_bits, checked_mul(checked_mul(checked_mul(n, g), hw), words));
  uint8_t* signs = scratch(t_signs, checked_mul(cg_, hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t gi = 0; gi < g; ++gi)
      xnor_pack_pixels(act_, x + (b * c + gi * cg_) * hw, cg_, hw, signs, bits + (b * g + gi) * hw * words);
  int32_t* acc = scratch(t_acc, shape_size(os));
  const int64_t taps = a_.kh * a_.kw;
  // One unit: an output row of one image and group. Each pixel's taps are gathered into one run of taps * words
  // words; a padded tap is gathered as 0 words, which adds popcount(w) of that tap to each row's distance: taken
  // back out below (xnor.h).
  const auto base_all = static_cast<int32_t>(taps * cg_);
  parallel_ranges(par, n * g * oh, 8, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<uint64_t> t_gather;
    thread_local std::vector<int32_t> t_pad;
    uint64_t* xk = scratch(t_gather, taps * words);
    int32_t* pad = scratch(t_pad, taps);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t y = u % oh, gi = (u / oh) % g, b = u / (oh * g);
      const uint64_t* img = bits + (b * g + gi) * hw * words;
      int32_t* row = acc + b * m_ * ohw + y * ow;
      for (int64_t xo = 0; xo < ow; ++xo) {
        int64_t npad = 0;
        for (int64_t r = 0; r < a_.kh; ++r) {
          const int64_t iy = y * a_.sh - a_.pt + r * a_.dh;
          for (int64_t q = 0; q < a_.kw; ++q) {
            const int64_t ix = xo * a_.sw - a_.pl + q * a_.dw, t = r * a_.kw + q;
            uint64_t* dst = xk + t * words;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
              for (int64_t i = 0; i < words; ++i) dst[i] = 0;
              pad[npad++] = static_cast<int32_t>(t);
            } else {
              const uint64_t* src = img + (iy * w + ix) * words;
              for (int64_t i = 0; i < words; ++i) dst[i] = src[i];
            }
          }
        }
        const auto base = static_cast<int32_t>(base_all - npad * cg_);
        xnor_dot(xk, base, *xnor_, gi, row + gi * mg * ohw + xo, ohw);
        for (int64_t j = gi * mg; npad && j < (gi + 1) * mg; ++j) {
          const int32_t* pop = xnor_->pop.data() + j * taps;
          int32_t padded = 0;
          for (int64_t i = 0; i < npad; ++i) padded += pop[pad[i]];
          row[xo + j * ohw] += 2 * padded;
        }
      }
    }
  });
  rescale(acc, out, n, m_, ohw, zero_corr_.data(), s_.data(), b_.data(), relu_);
}

void QConv::run_planes(const float* x, const Shape& xs, const Shape& os, float* out,
                       const gemm::Parallel& par) const {
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], g = a_.group, oh = os[2], ow = os[3];
  const int64_t hw = checked_mul(h, w), ohw = checked_mul(oh, ow), words = xnor_->words, mg = m_ / g;
  const int64_t taps = a_.kh * a_.kw, kwords = taps * words, planes = planes_;
  // Codes as the engine gets them (c = a - offset >= 0), then bits [n][g][plane][h * w][words].
  int8_t* codes = scratch(t_codes, shape_size(xs));
  quantize_codes(act_, x, codes, shape_size(xs));
  const int64_t plane_size = checked_mul(hw, words);
  uint64_t* bits = scratch(t_bits, checked_mul(checked_mul(checked_mul(n, g), planes), plane_size));
  uint8_t* tmp = scratch(t_signs, checked_mul(cg_, hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t gi = 0; gi < g; ++gi)
      for (int p = 0; p < planes_; ++p)
        plane_pack_pixels(codes + (b * c + gi * cg_) * hw, cg_, hw, p, tmp,
                          bits + ((b * g + gi) * planes + p) * plane_size);
  int32_t* acc = scratch(t_acc, shape_size(os));
  // One unit: an output row of one image and group. Each pixel's taps are gathered per plane into one run of
  // taps * words words; a padded tap gets the padding code's planes.
  parallel_ranges(par, n * g * oh, 8, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<uint64_t> t_gather;
    uint64_t* xk = scratch(t_gather, planes * kwords);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t y = u % oh, gi = (u / oh) % g, b = u / (oh * g);
      const uint64_t* img = bits + (b * g + gi) * planes * plane_size;
      int32_t* row = acc + b * m_ * ohw + y * ow;
      for (int64_t xo = 0; xo < ow; ++xo) {
        for (int64_t r = 0; r < a_.kh; ++r) {
          const int64_t iy = y * a_.sh - a_.pt + r * a_.dh;
          for (int64_t q = 0; q < a_.kw; ++q) {
            const int64_t ix = xo * a_.sw - a_.pl + q * a_.dw, t = r * a_.kw + q;
            const bool pad = iy < 0 || iy >= h || ix < 0 || ix >= w;
            for (int64_t p = 0; p < planes; ++p) {
              const uint64_t* src = pad ? pad_planes_.data() + p * words : img + p * plane_size + (iy * w + ix) * words;
              uint64_t* dst = xk + p * kwords + t * words;
              for (int64_t i = 0; i < words; ++i) dst[i] = src[i];
            }
          }
        }
        plane_dot(xk, planes_, kwords, *xnor_, gi, row + gi * mg * ohw + xo, ohw);
      }
    }
  });
  rescale(acc, out, n, m_, ohw, corr_.data(), s_.data(), b_.data(), relu_);
}

void QConv::set_leaky_relu(float alpha) {
  if (!std::isfinite(alpha)) throw Error("the LeakyRelu's alpha must be finite, got " + std::to_string(alpha));
  if (relu_) throw Error("a layer with a fused Relu cannot also take a LeakyRelu");
  leaky_ = alpha;
  if (out_q_) set_output_quant(*out_q_);  // the coefficients depend on it
}

namespace {
bool same_quant(const ActQuant& x, const ActQuant& y) {
  return x.scale == y.scale && x.zeropt == y.zeropt && x.lo == y.lo && x.hi == y.hi && x.bipolar == y.bipolar &&
         x.mode == y.mode && x.offset == y.offset && x.wide == y.wide;
}
}  // namespace

void QConv::set_output_quant(const ActQuant& q) {
  if (q.wide) throw Error("output codes need an int8 quantizer (9 to 24 bits have no int8 codes)");
  out_fast_ = codes_fast(q, corr_.data(), s_.data(), b_.data(), acc_bound_.data(), leaky_, m_);
  out_q_ = q;
}

namespace {
// ONNX LeakyRelu on float32 values, as onnxruntime computes it: y >= 0 ? y : alpha * y.
void leaky_relu_inplace(float* y, int64_t n, float alpha) {
  select_isa(&scalar::leaky_relu_isa, &avx2::leaky_relu_isa, &avx512::leaky_relu_isa)(y, n, alpha);
}
}  // namespace

std::vector<CodesFast> codes_fast(const ActQuant& q, const int64_t* corr, const double* s, const double* b,
                                  const int64_t* bound, std::optional<float> leaky, int64_t n) {
  std::vector<CodesFast> f(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) f[static_cast<size_t>(j)] = codes_fast_coeffs(q, s[j], b[j], corr[j], bound[j], leaky);
  return f;
}

CodesFastRows codes_fast_rows(const std::vector<CodesFast>& f) {
  CodesFastRows r;
  const size_t n = f.size(), padded = (n + 7) / 8 * 8;
  r.a.assign(padded, 0.f), r.a_lo.assign(padded, 0.f), r.c.assign(padded, 0.5f), r.c_lo.assign(padded, 0.f);
  r.e.assign(padded, 2.f), r.e1.assign(padded, -1.f);
  r.vector = n > 0;
  for (size_t j = 0; j < n; ++j) {
    r.a[j] = f[j].a, r.a_lo[j] = f[j].a_lo, r.c[j] = f[j].c, r.c_lo[j] = f[j].c_lo;
    r.e[j] = f[j].e, r.e1[j] = 1.f - f[j].e;
    if (!(f[j].e < 1.f)) r.vector = false;
    if (f[j].tie != CodesFast::kNone) r.tie = f[j].tie;
  }
  return r;
}

void rescale_codes_rows(const int32_t* acc, int64_t rows, int64_t n, int8_t* codes, const int64_t* corr,
                        const double* s, const double* b, bool relu, const ActQuant& q, const CodesFastRows* fast) {
  if (q.wide) throw Error("rescale_codes_rows: 9- to 24-bit quantizers have no int8 codes");
  if (fast != nullptr && fast->vector && !q.bipolar &&
      static_cast<int64_t>(fast->a.size()) >= n &&
      select_isa(&scalar::rescale_codes_rows_isa, &avx2::rescale_codes_rows_isa, &avx512::rescale_codes_rows_isa)(
          acc, rows, n, codes, corr, s, b, relu, q, *fast))
    return;
  // The exact formula: pieces of rows (or of a long row) rescaled into an L1 buffer, then quantized.
  const auto rescale_fn = select_isa(&scalar::rescale_isa, &avx2::rescale_isa, &avx512::rescale_isa);
  const auto quant = select_isa(&scalar::quantize_codes_isa, &avx2::quantize_codes_isa, &avx512::quantize_codes_isa);
  constexpr int64_t kBuf = 2048;
  alignas(32) float buf[kBuf];
  if (n > kBuf) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c0 = 0; c0 < n; c0 += kBuf) {
        const int64_t len = std::min(kBuf, n - c0);
        rescale_fn(acc + r * n + c0, buf, 1, len, 1, corr + c0, s + c0, b + c0, relu);
        quant(q, buf, codes + r * n + c0, len);
      }
    return;
  }
  const int64_t per = n > 0 ? kBuf / n : rows;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    const int64_t nr = std::min(per, rows - r0);
    rescale_fn(acc + r0 * n, buf, nr, n, 1, corr, s, b, relu);
    quant(q, buf, codes + r0 * n, nr * n);
  }
}

void rescale_codes(const int32_t* acc, int64_t stride, int8_t* codes, int64_t channels, int64_t rows, int64_t width,
                   const int64_t* corr, const double* s, const double* b, const int64_t* bound, bool relu,
                   std::optional<float> leaky, const float* resid, const ActQuant& q, const CodesFast* fast) {
  if (q.wide) throw Error("rescale_codes: 9- to 24-bit quantizers have no int8 codes");
  const auto grid_fn = select_isa(&scalar::rescale_grid_isa, &avx2::rescale_grid_isa, &avx512::rescale_grid_isa);
  const auto quant = select_isa(&scalar::quantize_codes_isa, &avx2::quantize_codes_isa, &avx512::quantize_codes_isa);
  const bool relu_first = relu && resid == nullptr;
  constexpr int64_t kBuf = 2048;
  alignas(32) float buf[kBuf];
  const int64_t plane = rows * width;
  if (plane == 0 || channels == 0) return;
  if (plane < kSmallPlane) {
    // A small image's few values per channel: the vector loop's per-channel set-up would outweigh them. As many
    // channels as the buffer holds rescaled in one call, then quantized in one (the exact formula).
    const int64_t per = kBuf / plane;
    for (int64_t j0 = 0; j0 < channels; j0 += per) {
      const int64_t nc = std::min(per, channels - j0), n = nc * plane, at = j0 * plane;
      grid_fn(acc + j0 * rows * stride, stride, buf, nc, rows, width, corr + j0, s + j0, b + j0, relu_first);
      if (leaky) leaky_relu_inplace(buf, n, *leaky);
      if (resid != nullptr) add_residual(buf, resid + at, n, relu);
      quant(q, buf, codes + at, n);
    }
    return;
  }
  const auto codes_fn = select_isa(&scalar::rescale_codes_isa, &avx2::rescale_codes_isa, &avx512::rescale_codes_isa);
  if (!q.bipolar && codes_fn != &scalar::rescale_codes_isa) {  // the vector loop where the path has one
    std::vector<CodesFast> own;
    if (fast == nullptr) own = codes_fast(q, corr, s, b, bound, leaky, channels), fast = own.data();
    if (codes_fn(acc, stride, codes, channels, rows, width, corr, s, b, relu, leaky ? &*leaky : nullptr, resid, q,
                 fast))
      return;
  }
  // The exact formula: pieces of rows rescaled into an L1 buffer, then quantized. A residual comes before the Relu.
  for (int64_t j = 0; j < channels; ++j) {
    const int32_t* aj = acc + j * rows * stride;
    int8_t* cj = codes + j * rows * width;
    if (width > kBuf) {  // a row longer than the buffer: pieces of it
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c0 = 0; c0 < width; c0 += kBuf) {
          const int64_t n = std::min(kBuf, width - c0);
          grid_fn(aj + r * stride + c0, stride, buf, 1, 1, n, corr + j, s + j, b + j, relu_first);
          if (leaky) leaky_relu_inplace(buf, n, *leaky);
          if (resid != nullptr) add_residual(buf, resid + (j * rows + r) * width + c0, n, relu);
          quant(q, buf, cj + r * width + c0, n);
        }
      continue;
    }
    const int64_t per = kBuf / width;  // whole rows per piece
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
      const int64_t nr = std::min(per, rows - r0);
      grid_fn(aj + r0 * stride, stride, buf, 1, nr, width, corr + j, s + j, b + j, relu_first);
      if (leaky) leaky_relu_inplace(buf, nr * width, *leaky);
      if (resid != nullptr) add_residual(buf, resid + (j * rows + r0) * width, nr * width, relu);
      quant(q, buf, cj + r0 * width, nr * width);
    }
  }
}

const int32_t* QConv::window_code_sums(const int8_t* codes, const Shape& xs, const Shape& os) const {
  // Per image and group (window_code_sums_isa): a tap off the image counts as cg padding codes -offset, what the
  // engine's padding stores. Sums modulo 2^32, as the engine's: only the sum with w_shift times them must be exact.
  thread_local std::vector<uint32_t> t_u, t_rows;
  thread_local std::vector<int32_t> t_sums;
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3], g = a_.group;
  const int64_t hw = checked_mul(h, w), ohw = checked_mul(oh, ow);
  uint32_t* u = scratch(t_u, hw);
  uint32_t* rows = scratch(t_rows, checked_mul(h, ow));
  int32_t* sums = scratch(t_sums, checked_mul(checked_mul(n, g), ohw));
  const auto pad = static_cast<uint32_t>(-int64_t{act_.offset} * cg_);
  const auto fn = select_isa(&scalar::window_code_sums_isa, &avx2::window_code_sums_isa,
                             &avx512::window_code_sums_isa);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t c0 = std::min(gi * cg_, c), c1 = std::min((gi + 1) * cg_, c);
      fn(codes + (b * c + c0) * hw, hw, c1 - c0, h, w, a_.pt, a_.pl, a_.kh, a_.kw, a_.sh, a_.sw, a_.dh, a_.dw, pad, u,
         rows, sums + (b * g + gi) * ohw, oh, ow);
    }
  return sums;
}

void QConv::emit(const Out& out, int64_t at, const int32_t* acc, int64_t stride, int64_t j0, int64_t channels,
                 int64_t rows, int64_t width, const int32_t* tsum) const {
  if (tsum != nullptr) {
    // w_shift: each sum gets w_shift[j] times its pixel's window sum (group of j), modulo 2^32 (the true sums fit
    // int32), into a per-thread copy the rescale reads. The rectangle's pixels are p0 + r * width + x (width is the
    // output width whenever rows > 1).
    const int64_t ohw = out.plane, b = at / (m_ * ohw), p0 = at % ohw, mg = m_ / a_.group;
    thread_local std::vector<int32_t> t_fix;
    int32_t* fixed = scratch(t_fix, checked_mul(channels, checked_mul(rows, width)));
    const auto add = select_isa(&scalar::add_shifted_sums_isa, &avx2::add_shifted_sums_isa,
                                &avx512::add_shifted_sums_isa);
    for (int64_t j = j0; j < j0 + channels; ++j)
      add(acc + (j - j0) * rows * stride, stride, fixed + (j - j0) * rows * width, rows, width,
          static_cast<uint32_t>(shift_[static_cast<size_t>(j)]), tsum + (b * a_.group + j / mg) * ohw + p0);
    return emit(out, at, fixed, width, j0, channels, rows, width, nullptr);
  }
  const auto grid_fn = select_isa(&scalar::rescale_grid_isa, &avx2::rescale_grid_isa, &avx512::rescale_grid_isa);
  const auto exact32_fn = select_isa(&scalar::rescale_grid_exact32_isa, &avx2::rescale_grid_exact32_isa,
                                     &avx512::rescale_grid_exact32_isa);
  if (out.channels_last) {
    // Pieces of kPix pixels of a row: every channel's values rescaled into a buffer [channels][kPix], then stored
    // pixel by pixel, the channels of a pixel contiguous (whole cache lines, not one float per line per channel).
    // Measured on exm_separable's last layer (16 channels, Zen 3): 512 pixels a piece 0.92x the time of 64.
    constexpr int64_t kPix = 512;
    const int64_t ohw = out.plane;
    const int64_t b = at / (m_ * ohw), p0 = at % ohw;
    thread_local std::vector<float> t_cl;
    float* buf = scratch(t_cl, checked_mul(channels, kPix));
    const auto store_cl =
        select_isa(&scalar::store_channels_last_isa, &avx2::store_channels_last_isa, &avx512::store_channels_last_isa);
    // An image's output larger than a core's L2 (the network's output, as exm_separable's 16 MB): its lines are
    // streamed to memory instead of each being read into the cache first. Measured on exm_separable's last layer
    // (Zen 4): the store 0.55x the time.
    const bool stream = ohw * m_ >= kStreamFloats;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c0 = 0; c0 < width; c0 += kPix) {
        const int64_t n = std::min(kPix, width - c0);
        for (int64_t j = j0; j < j0 + channels; ++j) {
          float* bj = buf + (j - j0) * kPix;
          const int32_t* aj = acc + ((j - j0) * rows + r) * stride + c0;
          if (exact32_[static_cast<size_t>(j)].ok) exact32_fn(aj, stride, bj, 1, 1, n, exact32_.data() + j, relu_);
          else grid_fn(aj, stride, bj, 1, 1, n, corr_.data() + j, s_.data() + j, b_.data() + j, relu_);
          if (leaky_) leaky_relu_inplace(bj, n, *leaky_);
        }
        store_cl(buf, kPix, channels, n, out.y + (b * ohw + p0 + r * width + c0) * m_ + j0, m_, stream);
      }
    return;
  }
  if (out.codes == nullptr) {
    if (!any_exact32_) {
      grid_fn(acc, stride, out.y + at, channels, rows, width, corr_.data() + j0, s_.data() + j0, b_.data() + j0,
              relu_);
    } else {
      for (int64_t j = j0, end = j0 + channels; j < end;) {  // runs of channels: float32 where exact (Exact32)
        const bool ok = exact32_[static_cast<size_t>(j)].ok;
        int64_t k = j + 1;
        while (k < end && exact32_[static_cast<size_t>(k)].ok == ok) ++k;
        const int32_t* aj = acc + (j - j0) * rows * stride;
        float* yj = out.y + at + (j - j0) * rows * width;
        if (ok) exact32_fn(aj, stride, yj, k - j, rows, width, exact32_.data() + j, relu_);
        else grid_fn(aj, stride, yj, k - j, rows, width, corr_.data() + j, s_.data() + j, b_.data() + j, relu_);
        j = k;
      }
    }
    if (leaky_) leaky_relu_inplace(out.y + at, channels * rows * width, *leaky_);  // the rows just written
    if (out.resid != nullptr) add_residual(out.y + at, out.resid + at, channels * rows * width, out.resid_relu);
    return;
  }
  const bool pre = out_q_ && same_quant(*out_q_, *out.quant);
  const bool resid = out.resid != nullptr;
  rescale_codes(acc, stride, out.codes + at, channels, rows, width, corr_.data() + j0, s_.data() + j0,
                b_.data() + j0, acc_bound_.data() + j0, relu_ || (resid && out.resid_relu), leaky_,
                resid ? out.resid + at : nullptr, *out.quant, pre ? out_fast_.data() + j0 : nullptr);
  if (out.table != nullptr) map_codes(out.table, out.codes + at, channels * rows * width, out.table_small);
}

int64_t QConv::batch_tasks(const Shape& xs) const {
  if (xs.size() != 4 || xs[0] <= 1) return 1;
  const Shape os = output_shape(xs);
  const int64_t per_image =
      checked_mul(checked_mul(m_, cg_), checked_mul(checked_mul(a_.kh, a_.kw), checked_mul(os[2], os[3])));
  const int64_t tasks = checked_mul(xs[0], per_image) / kBatchTaskMacs;
  return std::clamp<int64_t>(tasks, 1, std::min<int64_t>(xs[0], 64));
}

void QConv::emit_channels(const gemm::Parallel& par, const Out& out, int64_t at, int64_t plane, const int32_t* acc,
                          int64_t stride, int64_t j0, int64_t channels, int64_t rows, int64_t width,
                          const int32_t* tsum) const {
  const int64_t per = rows * width;
  // A channels-last output keeps one task: its pixels' channels are stored together (whole lines).
  const int64_t min_channels =
      out.channels_last ? channels : std::max<int64_t>(1, kEmitTaskValues / std::max<int64_t>(per, 1));
  parallel_ranges(par, channels, min_channels, [&](int64_t c0, int64_t c1) {
    if (plane == per || out.channels_last)  // emit() takes the range in one call (its channels `per` apart)
      return emit(out, at + c0 * plane, acc + c0 * rows * stride, stride, j0 + c0, c1 - c0, rows, width, tsum);
    for (int64_t c = c0; c < c1; ++c)
      emit(out, at + c * plane, acc + c * rows * stride, stride, j0 + c, 1, rows, width, tsum);
  });
}

void QConv::run_small_k(const int8_t* codes, const Shape& xs, Out out, const gemm::Parallel& par,
                        const int32_t* tsum) const {
  // Pieces of kPix pixels of an image: every channel's sums into an L1 buffer [m][kPix], then the epilogue (one
  // channel at a time for planar outputs, all of them for channels-last ones).
  constexpr int64_t kPix = 1024;
  const int64_t n = xs[0], c = xs[1], hw = checked_mul(xs[2], xs[3]);
  const int64_t pieces = (hw + kPix - 1) / kPix;
  const auto sums = select_isa(&scalar::small_k_sums_isa, &avx2::small_k_sums_isa, &avx512::small_k_sums_isa);
  parallel_ranges(par, n * pieces, 4, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<int32_t> t_small;
    int32_t* acc = scratch(t_small, checked_mul(m_, kPix));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / pieces, p0 = (u % pieces) * kPix, np = std::min(kPix, hw - p0);
      sums(codes + b * c * hw + p0, hw, c, small_w_.data(), m_, np, acc, kPix);
      if (out.channels_last) {
        emit(out, b * m_ * hw + p0, acc, kPix, 0, m_, 1, np, tsum);
        continue;
      }
      for (int64_t j = 0; j < m_; ++j) emit(out, (b * m_ + j) * hw + p0, acc + j * kPix, kPix, j, 1, 1, np, tsum);
    }
  });
}

void QConv::run(In in, const Shape& xs, Out out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  const Shape os = output_shape(xs);
  if ((in.x == nullptr) == (in.codes == nullptr)) throw Error("QConv::run: give the input as values or as codes");
  if (out.channels_last && (out.codes != nullptr || out.y == nullptr || out.resid != nullptr))
    throw Error("QConv::run: a channels-last output is float32 values, without a residual");
  out.plane = os[2] * os[3];
  if (out.codes != nullptr && (out.quant == nullptr || out.quant->wide))
    throw Error("QConv::run: output codes need an int8 quantizer (9 to 24 bits have no int8 codes)");
  const int64_t tasks = batch_tasks(xs);
  if (tasks > 1) {
    // A batch: ranges of images are the parallel units, each run whole on one thread (its quad planes, GEMM and
    // rescale one after the other in that thread's caches), instead of every image's steps each split over the pool.
    const int64_t n = xs[0];
    const int64_t in_img = checked_mul(checked_mul(xs[1], xs[2]), xs[3]), out_img = checked_mul(m_, out.plane);
    const gemm::Parallel inline_par(&gemm::run_inline);
    par(static_cast<size_t>(tasks), [&](size_t t) {
      const int64_t b0 = n * static_cast<int64_t>(t) / tasks, b1 = n * static_cast<int64_t>(t + 1) / tasks;
      In bi = in;
      if (bi.x != nullptr) bi.x += b0 * in_img;
      if (bi.codes != nullptr) bi.codes += b0 * in_img;
      Out bo = out;
      if (bo.y != nullptr) bo.y += b0 * out_img;
      if (bo.codes != nullptr) bo.codes += b0 * out_img;
      if (bo.resid != nullptr) bo.resid += b0 * out_img;
      const Shape bs = {b1 - b0, xs[1], xs[2], xs[3]};
      run_images(bi, bs, output_shape(bs), bo, inline_par, kernel);
    });
    return;
  }
  run_images(in, xs, os, out, par, kernel);
}

void QConv::run_images(In in, const Shape& xs, const Shape& os, Out out, const gemm::Parallel& par,
                       gemm::Kernel kernel) const {
  if (in.codes != nullptr && act_.wide)
    throw Error("a 9- to 24-bit activation quantizer has no int8 codes: give the layer float32 values");
  const bool bits = in.x != nullptr && xnor_ && kernel == gemm::Kernel::kAuto;
  if (in.codes != nullptr || !(act_.wide || bits)) return run_engine(in, xs, os, out, par, kernel);
  // The paths that rescale a whole int32 output: into float32, quantized afterwards for codes.
  const int64_t n_out = shape_size(os);
  float* y = out.codes != nullptr || out.channels_last ? scratch(t_outf, n_out) : out.y;
  if (act_.wide) run_wide(in.x, xs, os, y, par, kernel);
  else if (planes_) run_planes(in.x, xs, os, y, par);
  else run_xnor(in.x, xs, os, y, par);
  if (leaky_) leaky_relu_inplace(y, n_out, *leaky_);
  if (out.resid != nullptr) add_residual(y, out.resid, n_out, out.resid_relu);
  if (out.codes != nullptr) quantize_codes(*out.quant, y, out.codes, n_out);
  if (out.codes != nullptr && out.table != nullptr) map_codes(out.table, out.codes, n_out, out.table_small);
  if (out.channels_last) {  // planar [N][M][P] -> [N][P][M]
    const int64_t ohw = os[2] * os[3];
    const auto store_cl =
        select_isa(&scalar::store_channels_last_isa, &avx2::store_channels_last_isa, &avx512::store_channels_last_isa);
    const bool stream = ohw * m_ >= kStreamFloats;
    for (int64_t b = 0; b < os[0]; ++b) store_cl(y + b * m_ * ohw, ohw, m_, ohw, out.y + b * ohw * m_, m_, stream);
  }
}

void QConv::run_engine(In in, const Shape& xs, const Shape& os, Out out, const gemm::Parallel& par,
                       gemm::Kernel kernel) const {
  const int64_t n_in = shape_size(xs), n_out = shape_size(os);
  const auto input_codes = [&] {  // the input as its stored codes (quantized here when given as values)
    if (in.codes != nullptr) return in.codes;
    int8_t* q = scratch(t_codes, n_in);
    quantize_codes(act_, in.x, q, n_in);
    return static_cast<const int8_t*>(q);
  };
  // w_shift: the window sums of the input codes, added to the sums (times w_shift[j]) as they are rescaled; the
  // input is quantized first (every path then reads the codes)
  const int32_t* tsum = nullptr;
  if (!shift_.empty()) {
    const int8_t* codes = input_codes();
    in = In{nullptr, codes};
    tsum = window_code_sums(codes, xs, os);
  }
  if (!small_w_.empty() && kernel == gemm::Kernel::kAuto) return run_small_k(input_codes(), xs, out, par, tsum);
  // A large output runs in bands of output rows (engine without pads: every band reads its own input rows).
  const bool engine_pads = !explicit_pad_ && (a_.pt || a_.pl || a_.pb || a_.pr);
  int64_t band = 0;
  if (!engine_pads && checked_mul(n_out, 4) > kBandMinBytes) {  // n_out > 0: os[3] > 0
    const int64_t rows = std::max<int64_t>(1, kBandAccBytes / checked_mul(checked_mul(m_, os[3]), 4));
    if (os[2] >= 2 * rows) band = rows;
  }
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = nonneg_max(act_);
  const int64_t oh = os[2], ow = os[3], mg = m_ / a_.group;
  auto sink = [&](int64_t b, int64_t g, const int32_t* sums, int64_t stride) {
    emit_channels(par, out, (b * m_ + g * mg) * oh * ow, oh * ow, sums, stride, g * mg, mg, oh, ow, tsum);
  };
  // Codes given to a strided layer skip the fill below: the engine builds its quad planes from the codes tensor
  // itself, with vector loops for stride 2 (interleave_quad_even), where the fill gathers the selected positions
  // one byte at a time. Measured (Zen 3, AVX2): resnet_mini's 1x1 stride-2 layer 0.75x the time, its 3x3 stride-2
  // layer 0.95x, same bits.
  const bool strided_codes = in.codes != nullptr && (a_.sh != 1 || a_.sw != 1);
  if (!strided_codes && band == 0 && !explicit_pad_ && n_out > 0 && conv_.gemm_path() && conv_.quad_fill_ok(xs)) {
    // Channel-quad path: each quad of channels quantized (quantize_codes' loop) into an L1 buffer (or its codes
    // copied there) and from there straight into the quad planes the kernel reads; no codes tensor, no phase
    // planes. A strided layer whose taps read one row or column phase (1x1 stride 2) takes only the positions it
    // reads.
    const auto quant = select_isa(&scalar::quantize_codes_isa, &avx2::quantize_codes_isa, &avx512::quantize_codes_isa);
    const auto quant_grid =
        select_isa(&scalar::quantize_codes_grid_isa, &avx2::quantize_codes_grid_isa, &avx512::quantize_codes_grid_isa);
    const int64_t c = xs[1], h = xs[2], w = xs[3];
    conv_.run_raw_fill(
        [&](int64_t b, int64_t ch, const conv::QuadGrid& sel, int8_t* dst) {
          const bool whole = sel.rows == h && sel.cols == w;
          if (in.codes != nullptr) {
            const int8_t* src = in.codes + (b * c + ch) * h * w;
            if (whole) return static_cast<void>(std::memcpy(dst, src, static_cast<size_t>(4 * h * w)));
            for (int64_t i = 0; i < 4; ++i)
              for (int64_t r = 0; r < sel.rows; ++r) {
                const int8_t* sr = src + i * h * w + (sel.r0 + r * sel.rstep) * w + sel.c0;
                int8_t* dr = dst + (i * sel.rows + r) * sel.cols;
                for (int64_t q = 0; q < sel.cols; ++q) dr[q] = sr[q * sel.cstep];
              }
            return;
          }
          const float* src = in.x + (b * c + ch) * h * w;
          if (whole) return quant(act_, src, dst, 4 * h * w);
          for (int64_t i = 0; i < 4; ++i)
            quant_grid(act_, src + i * h * w + sel.r0 * w + sel.c0, sel.rstep * w, sel.cstep, sel.rows, sel.cols,
                       dst + i * sel.rows * sel.cols);
        },
        xs, ep, sink, par, kernel);
    return;
  }
  const int8_t* codes = input_codes();
  // Depthwise on the channels-last kernel: its bands of sums rescaled while in cache (no int32 output tensor).
  const Shape padded_shape = explicit_pad_ ? Shape{xs[0], xs[1], checked_add(xs[2], a_.pt + a_.pb, "padded height"),
                                                   checked_add(xs[3], a_.pl + a_.pr, "padded width")}
                                           : xs;
  const bool dw = conv_.depthwise() && conv_.dw_raw_ok(padded_shape, kernel, &ep);
  if (band > 0 && !dw) return run_bands(codes, xs, os, band, out, par, kernel, tsum);
  const int8_t* engine_in = codes;
  Shape es = xs;
  if (explicit_pad_) {
    const int64_t h = xs[2], w = xs[3], hp = h + a_.pt + a_.pb, wp = w + a_.pl + a_.pr;
    const int64_t planes = checked_mul(xs[0], xs[1]);
    int8_t* padded = scratch(t_padded, checked_mul(planes, checked_mul(hp, wp)));
    pad_codes(codes, planes, h, w, a_, static_cast<int8_t>(-act_.offset), padded);
    engine_in = padded;
    es = {xs[0], xs[1], hp, wp};
  }
  // A depthwise layer keeps the engine's pads (needs_explicit_pad): the padding code is added at the border.
  const int32_t pad_code = explicit_pad_ || act_.wide ? 0 : -act_.offset;
  if (dw) {
    conv_.run_raw_dw(
        engine_in, es, ep,
        [&](int64_t b, int64_t ch, int64_t y0, int64_t y1, const int32_t* sums) {
          emit(out, ((b * m_ + ch) * oh + y0) * ow, sums, ow, ch, 1, y1 - y0, ow, tsum);
        },
        par, kernel, pad_code);
    return;
  }
  if (conv_.gemm_path() && conv_.bands_ok(es)) {
    // Quad planes larger than L2 keeps: bands of output rows, each rescaled while its sums are in cache.
    conv_.run_raw_bands(
        engine_in, es, ep,
        [&](int64_t b, int64_t g, int64_t y0, int64_t y1, const int32_t* sums) {
          const int64_t j0 = g * mg;
          emit_channels(par, out, ((b * m_ + j0) * oh + y0) * ow, oh * ow, sums, ow, j0, mg, y1 - y0, ow, tsum);
        },
        par, kernel);
    return;
  }
  if (conv_.gemm_path()) {
    // Each image's sums are rescaled while they are in cache, straight from the engine's grid (no int32 output
    // tensor, no copy of the valid columns).
    conv_.run_raw(engine_in, es, ep, sink, par, kernel);
    return;
  }
  int32_t* acc = scratch(t_acc, n_out);
  conv_.run(engine_in, es, ep, acc, par, kernel);
  if (pad_code != 0 && engine_pads)
    for (int64_t p = 0; p < os[0] * m_; ++p)
      conv_.add_pad_sums(acc + p * oh * ow, p % m_, 0, oh, xs[2], xs[3], pad_code);
  for (int64_t b = 0; b < os[0]; ++b)
    emit_channels(par, out, b * m_ * oh * ow, oh * ow, acc + b * m_ * oh * ow, oh * ow, 0, m_, 1, oh * ow, tsum);
}

// A wide activation (ActQuant::wide): the int8 engine on each byte plane (the highest first) with the same
// prepared weights, every plane padded here (explicit_pad_) with the planes of the padding value a = 0, then the
// exact combination in rescale_wide.
void QConv::run_wide(const float* x, const Shape& xs, const Shape& os, float* out, const gemm::Parallel& par,
                     gemm::Kernel kernel) const {
  const int np = act_.planes;
  const int64_t n_in = shape_size(xs), n_out = shape_size(os);
  int8_t* codes = scratch(t_codes, checked_mul(n_in, np));
  quantize_wide(act_, x, codes, n_in);
  const int8_t* in = codes;
  int64_t in_stride = n_in;
  Shape es = xs;
  if (explicit_pad_) {
    const int64_t h = xs[2], w = xs[3], hp = h + a_.pt + a_.pb, wp = w + a_.pl + a_.pr;
    const int64_t planes = checked_mul(xs[0], xs[1]), size = checked_mul(planes, checked_mul(hp, wp));
    int8_t* padded = scratch(t_padded, checked_mul(size, np));
    for (int p = 0; p < np; ++p)  // each plane padded with its byte of the padding's stored value -offset
      pad_codes(codes + p * n_in, planes, h, w, a_, wide_byte(-act_.offset, np, p), padded + p * size);
    in = padded;
    in_stride = size;
    es = {xs[0], xs[1], hp, wp};
  }
  int32_t* acc = scratch(t_acc, checked_mul(n_out, np));
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = -1;
  for (int p = 0; p < np; ++p) conv_.run(in + p * in_stride, es, ep, acc + p * n_out, par, kernel);
  rescale_wide(acc, np, n_out, out, os[0], os[1], os[2] * os[3], corr_.data(), s_.data(), b_.data(), relu_);
}

// Output rows [y0, y1) of image b read the padded input rows [y0 * sh, (y1 - 1) * sh + (kh - 1) * dh + 1): each band
// copies those rows of every channel (padding with the code -offset when explicit_pad_; the engine has no pads
// then; a plain 1x1 layer reads them in place, its planes h * w apart), runs the engine on them single-threaded
// and rescales its sums while they are in cache. The bands are the parallel units. Same sums and the same rescale
// per element as the whole-image path: the same bits.
void QConv::run_bands(const int8_t* codes, const Shape& xs, const Shape& os, int64_t band, Out out,
                      const gemm::Parallel& par, gemm::Kernel kernel, const int32_t* tsum) const {
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3], ohw = oh * ow;
  const int64_t pt = explicit_pad_ ? a_.pt : 0, pl = explicit_pad_ ? a_.pl : 0, pr = explicit_pad_ ? a_.pr : 0;
  const int64_t wp = w + pl + pr, mg = m_ / a_.group, bands = (oh + band - 1) / band;
  const int8_t fill = static_cast<int8_t>(-act_.offset);
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = nonneg_max(act_);
  const gemm::Parallel inline_par(&gemm::run_inline);
  // A plain 1x1 layer (no padding) reads each band's rows in place instead of a copy.
  const bool in_place = conv_.plain_1x1() && !explicit_pad_;
  parallel_ranges(par, n * bands, 1, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<int8_t> t_band;
    thread_local std::vector<int32_t> t_band_acc;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / bands, y0 = (u % bands) * band, y1 = std::min(oh, y0 + band), rows = y1 - y0;
      const int64_t r0 = y0 * a_.sh, in_rows = (rows - 1) * a_.sh + (a_.kh - 1) * a_.dh + 1;
      const Shape bs = {1, c, in_rows, wp};
      const int64_t ob = b * m_ * ohw + y0 * ow;
      // Channel j's rows of this band: acc[(j * rows + r) * stride + p] -> output ob + j * ohw + r * ow + p.
      auto rescale_band = [&](const int32_t* acc, int64_t stride, int64_t j0, int64_t channels) {
        if (out.channels_last) return emit(out, ob + j0 * ohw, acc, stride, j0, channels, rows, ow, tsum);
        for (int64_t j = j0; j < j0 + channels; ++j)
          emit(out, ob + j * ohw, acc + (j - j0) * rows * stride, stride, j, 1, rows, ow, tsum);
      };
      auto sink = [&](int64_t, int64_t g, const int32_t* sums, int64_t stride) {
        rescale_band(sums, stride, g * mg, mg);
      };
      if (in_place) {  // the band's rows of each plane, read where they are (h * w apart)
        conv_.run_raw(codes + b * c * h * w + r0 * w, bs, ep, sink, inline_par, kernel, h * w);
        continue;
      }
      int8_t* in = scratch(t_band, checked_mul(c, checked_mul(in_rows, wp)));
      for (int64_t ch = 0; ch < c; ++ch) {
        const int8_t* src = codes + (b * c + ch) * h * w;
        for (int64_t r = 0; r < in_rows; ++r) {
          int8_t* dst = in + (ch * in_rows + r) * wp;
          const int64_t sr = r0 + r - pt;
          if (sr < 0 || sr >= h) {
            std::memset(dst, fill, static_cast<size_t>(wp));
            continue;
          }
          std::memset(dst, fill, static_cast<size_t>(pl));
          std::memcpy(dst + pl, src + sr * w, static_cast<size_t>(w));
          std::memset(dst + pl + w, fill, static_cast<size_t>(pr));
        }
      }
      if (conv_.gemm_path()) {
        conv_.run_raw(in, bs, ep, sink, inline_par, kernel);
      } else {
        int32_t* acc = scratch(t_band_acc, checked_mul(m_, rows * ow));
        conv_.run(in, bs, ep, acc, inline_par, kernel);
        rescale_band(acc, ow, 0, m_);
      }
    }
  });
}

// ---- QGemm -------------------------------------------------------------------------------------------------

QGemm::QGemm(const int8_t* w, int64_t n, int64_t k, const ActQuant& act, std::vector<double> s,
             std::vector<double> b, bool relu, bool xnor, std::vector<int32_t> w_shift)
    : n_(n),
      k_(k),
      act_(nonneg_codes(act)),
      s_(std::move(s)),
      b_(std::move(b)),
      relu_(relu),
      packed_(gemm::pack_weights(w, n, k, k, gemm::PackedWeights::Layout::kPanels)) {
  check_channel_params(s_, b_, n);
  corr_ = row_sums(w, n, k);
  acc_bound_ = acc_bounds(w, n, k);
  if (apply_weight_shift(w, n, k, act_, w_shift, &corr_, &acc_bound_)) {
    shift_ = std::move(w_shift);
    xnor = false;  // the bit kernels take weights of -1 and +1, not shifted ones
  }
  for (auto& c : corr_) c *= int64_t{act_.offset} + wide_lift(act_);
  if (xnor && !act_.wide) xnor_ = bit_weights(act_, w, n, 1, k, 1, &planes_);
  if (xnor_ && planes_ == 0) zero_corr_.assign(static_cast<size_t>(n), 0);
  const std::vector<Exact32> e = exact32_coeffs(corr_.data(), s_.data(), b_.data(), acc_bound_.data(), n);
  if (!act_.wide && std::all_of(e.begin(), e.end(), [](const Exact32& x) { return x.ok; })) {
    for (const Exact32& x : e) {
      e_c_.push_back(x.c);
      e_s_.push_back(x.s);
      e_b_.push_back(x.b);
    }
  }
}

void QGemm::rescale_rows(const int32_t* acc, int64_t rows, float* out) const {
  if (!e_c_.empty()) return rescale_rows_exact32(acc, out, rows, n_, e_c_.data(), e_s_.data(), e_b_.data(), relu_);
  rescale(acc, out, rows, n_, 1, corr_.data(), s_.data(), b_.data(), relu_);
}

void QGemm::set_output_quant(const ActQuant& q) {
  if (q.wide) throw Error("output codes need an int8 quantizer (9 to 24 bits have no int8 codes)");
  out_fast_ = codes_fast_rows(codes_fast(q, corr_.data(), s_.data(), b_.data(), acc_bound_.data(), std::nullopt, n_));
  out_q_ = q;
}

void QGemm::run_xnor(const float* x, int64_t rows, float* out, const gemm::Parallel& par) const {
  const int64_t words = xnor_->words;
  uint64_t* bits = scratch(t_bits, checked_mul(rows, words));
  xnor_pack_rows(act_, x, rows, k_, bits);
  int32_t* acc = scratch(t_acc, checked_mul(rows, n_));
  parallel_ranges(par, rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) xnor_dot(bits + r * words, static_cast<int32_t>(k_), *xnor_, 0, acc + r * n_, 1);
  });
  rescale(acc, out, rows, n_, 1, zero_corr_.data(), s_.data(), b_.data(), relu_);
}

void QGemm::run_planes(const float* x, int64_t rows, float* out, const gemm::Parallel& par) const {
  const int64_t words = xnor_->words, plane_size = checked_mul(rows, words);
  int8_t* codes = scratch(t_codes, checked_mul(rows, k_));
  quantize_codes(act_, x, codes, rows * k_);
  uint64_t* bits = scratch(t_bits, checked_mul(planes_, plane_size));  // [plane][rows][words]
  for (int p = 0; p < planes_; ++p) plane_pack_rows(codes, rows, k_, p, bits + p * plane_size);
  int32_t* acc = scratch(t_acc, checked_mul(rows, n_));
  parallel_ranges(par, rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) plane_dot(bits + r * words, planes_, plane_size, *xnor_, 0, acc + r * n_, 1);
  });
  rescale_rows(acc, rows, out);
}

// A wide activation: the int8 engine on each byte plane with the same packed weights, combined in rescale_wide.
void QGemm::run_wide(const float* x, int64_t rows, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  const int np = act_.planes;
  const int64_t n_in = checked_mul(rows, k_), n_out = checked_mul(rows, n_);
  int8_t* codes = scratch(t_codes, checked_mul(n_in, np));
  quantize_wide(act_, x, codes, n_in);
  int32_t* acc = scratch(t_acc, checked_mul(n_out, np));
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = -1;
  for (int p = 0; p < np; ++p)
    gemm::gemm_rows(codes + p * n_in, rows, k_, packed_, ep, acc + p * n_out, n_, par, kernel);
  rescale_wide(acc, np, n_out, out, rows, n_, 1, corr_.data(), s_.data(), b_.data(), relu_);
}

// Float32 values in, float32 values out, on the path the layer takes for them.
void QGemm::run_values(const float* x, int64_t rows, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  if (act_.wide) return run_wide(x, rows, out, par, kernel);
  return planes_ ? run_planes(x, rows, out, par) : run_xnor(x, rows, out, par);
}

void QGemm::run(In in, int64_t rows, Out out, const gemm::Parallel& par, gemm::Kernel kernel) const {
  if ((in.x == nullptr) == (in.codes == nullptr)) throw Error("QGemm::run: give the input as values or as codes");
  if ((out.y == nullptr) == (out.codes == nullptr)) throw Error("QGemm::run: give the output as values or as codes");
  if (out.codes != nullptr && !out_q_) throw Error("QGemm::run: output codes need set_output_quant first");
  if (in.codes != nullptr && act_.wide) throw Error("a 9- to 24-bit activation quantizer has no int8 codes");
  const int64_t n_in = checked_mul(rows, k_), n_out = checked_mul(rows, n_);
  if (in.x != nullptr && (act_.wide || (xnor_ && kernel == gemm::Kernel::kAuto))) {
    // The byte planes and the bit kernels end in float32 values; codes are those values quantized.
    float* y = out.codes != nullptr ? scratch(t_outf, n_out) : out.y;
    run_values(in.x, rows, y, par, kernel);
    if (out.codes != nullptr) quantize_codes(*out_q_, y, out.codes, n_out);
    return;
  }
  const int8_t* codes = in.codes;
  if (codes == nullptr) {
    int8_t* q = scratch(t_codes, n_in);
    quantize_codes(act_, in.x, q, n_in);
    codes = q;
  }
  int32_t* acc = scratch(t_acc, n_out);
  gemm::Epilogue ep;
  ep.kind = gemm::OutKind::kRaw;
  ep.x_max = nonneg_max(act_);
  gemm::gemm_rows(codes, rows, k_, packed_, ep, acc, n_, par, kernel);
  if (!shift_.empty()) {  // w_shift: each row's sums get w_shift[j] times the row's sum of codes (modulo 2^32)
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* c = codes + r * k_;
      uint32_t t = 0;
      for (int64_t i = 0; i < k_; ++i) t += static_cast<uint32_t>(int32_t{c[i]});
      int32_t* a = acc + r * n_;
      for (int64_t j = 0; j < n_; ++j)
        a[j] = static_cast<int32_t>(static_cast<uint32_t>(a[j]) + static_cast<uint32_t>(shift_[static_cast<size_t>(j)]) * t);
    }
  }
  if (out.codes != nullptr)
    rescale_codes_rows(acc, rows, n_, out.codes, corr_.data(), s_.data(), b_.data(), relu_, *out_q_, &out_fast_);
  else
    rescale_rows(acc, rows, out.y);
}

}  // namespace ortquant::integer
