// Integer execution of QONNX quantized layers (integer mode): the activation quantizer of a
// Conv / MatMul / Gemm runs in-kernel and produces integer codes, the layer runs on the int8 GEMM engine with
// weight codes prepared once, the int32 sum is exact, and one float64 rescale per output channel gives float32.
//
// Numerics (docs/ops.md, "Integer mode"):
//   activation  q = clamp_round(x / s + z) exactly as QONNX Quant (float32 division, clamp before rounding,
//               the op's rounding mode; signed 1-bit / BipolarQuant: q = (x / s + z >= 0) ? 1 : -1), a = q - z;
//               NaN inputs quantize to a = 0 (the float path would propagate NaN; documented difference)
//   sum         acc_j = sum_k a_k * wq_jk, exact (int32 from the engine, corrected in int64; 9- to 24-bit
//               activations: two or three int8 byte planes on the engine, combined exactly in float64, see
//               ActQuant::wide)
//   output      y_j = float32( double(acc_j) * S_j + B_j )   two float64 operations (round to nearest even,
//               no fused multiply-add), then one rounding to float32. S_j and B_j are float64 values the graph
//               transform computes (scale products, folded BatchNorm) and passes to the op; a following Relu
//               may be fused: y < 0 ? 0 : y.
// Every ISA path computes the same bits: the quantization is float32 IEEE arithmetic element by element, the
// engine's sums are exact integers, and the rescale is the same two float64 operations.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/conv/conv.h"
#include "core/gemm/gemm.h"
#include "core/integer/xnor.h"
#include "core/rounding.h"
#include "core/shape.h"

namespace ortquant::integer {

// The in-kernel activation quantizer. Codes are stored as int8: code = (q - z) - offset, with offset chosen so
// that every reachable q - z fits (0 when [lo - z, hi - z] is inside [-128, 127], e.g. 8-bit unsigned codes with
// z = 0 get offset 128). The layer adds offset * rowsum(W_j) back in the integer domain.
struct ActQuant {
  float scale = 1.f;
  float zeropt = 0.f;  // an integer value
  float lo = -128.f, hi = 127.f;
  bool bipolar = false;  // q = (x / s + z >= 0) ? 1 : -1
  RoundMode mode = RoundMode::kHalfEven;
  int32_t offset = 0;
  // 9 to 24 bits (wide): the stored value c = (q - z) - offset is split into int8 byte planes, two for 9 to 16
  // bits (c in [-32768, 32767]: c = 256 * h + l) and three for 17 to 24 bits (c in [-2^23, 2^23 - 1]: c = 65536 * h
  // + 256 * m + l), h = floor(c / 256^(planes - 1)) in [-128, 127] stored as is, every lower byte l, m in [0, 255]
  // stored as l - 128. The layer runs the int8 engine on each plane with the same weights (each sum exact in int32:
  // |sum| <= K * 128 * 128) and combines acc = sum over planes of 256^p * acc_p + (offset + lift) * rowsum(W) exactly
  // in float64 (|acc| < 2^51; lift = 128 for two planes, 128 + 256 * 128 for three: the lower bytes' shift).
  bool wide = false;
  int planes = 1;  // int8 planes of a stored code: 1, or 2 / 3 when wide
};

// The stored lower bytes' shift a wide quantizer's planes add back: 128 * (1 + 256 + ...) over its lower planes
// (0 for a quantizer of at most 8 bits).
inline int64_t wide_lift(const ActQuant& a) { return a.planes == 3 ? 128 + 256 * 128 : a.planes == 2 ? 128 : 0; }

// Byte p (0: the highest) of a wide quantizer's stored value c on `planes` byte planes, as the plane stores it:
// the highest floor(c / 256^(planes - 1)) as is, every lower byte minus 128 (ActQuant::wide).
inline int8_t wide_byte(int32_t c, int planes, int p) {
  const int32_t k_low = int32_t{1} << (8 * (planes - 1)), low = c & (k_low - 1);  // c = k_low * h + low, exactly
  if (p == 0) return static_cast<int8_t>((c - low) / k_low);
  return static_cast<int8_t>(static_cast<int32_t>((static_cast<uint32_t>(low) >> (8 * (planes - 1 - p))) & 255u) - 128);
}

// Validates and builds the quantizer of QONNX Quant(scale, zeropt, bits, signed, narrow, mode) (signed 1-bit is
// the bipolar case), or of BipolarQuant(scale) when `bipolar` (bits, signed, narrow, zeropt ignored and z = 0).
// Throws Error unless scale is finite and > 0, zeropt an integer of magnitude <= 65536, 1 <= bits <= 24, and (9 to
// 24 bits) the values q - z together with 0 (the padding) span at most 65536 levels (16 bits: the two byte planes'
// range) or 2^24 levels (17 to 24 bits: three planes).
ActQuant make_act_quant(float scale, float zeropt, int64_t bits, bool is_signed, bool narrow, RoundMode mode,
                        bool bipolar);

// `a` with offset = min(q - z, 0) when every value a = q - z it can stand for, and 0 (padding), lie within 127
// of each other (any quantizer of at most 7 bits net of its zero point, and the bipolar one): its stored codes are
// then in [0, 127]. Otherwise `a` unchanged. QConv and QGemm use it for the AVX2 engine's int16 paths.
ActQuant nonneg_codes(ActQuant a);

// The largest stored code of `a` when every stored code (NaN and the code of padding, -offset, included) lies in
// [0, 127]; -1 otherwise. QConv passes it to the engine as gemm::Epilogue::x_max.
int32_t nonneg_max(const ActQuant& a);

// codes[i] = code of x[i], i < n (on the active ISA path). Throws Error for a wide quantizer (quantize_wide).
void quantize_codes(const ActQuant& a, const float* x, int8_t* codes, int64_t n);

// What QONNX Quant outputs for the values whose codes these are: y[i] = float32((codes[i] + offset) * scale), the
// integer codes[i] + offset being q - z exactly.
void dequantize_codes(const ActQuant& a, const int8_t* codes, float* y, int64_t n);
// codes[i] = table[codes[i] + 128] (table: 256 int8 values), in place. `small`: every code is in [0, 15] (the
// writer's quantizer says so), so a 16-entry lookup (vpshufb on AVX2) does it.
void map_codes(const int8_t* table, int8_t* codes, int64_t n, bool small = false);

// A wide quantizer's (ActQuant::wide) byte planes of x[i], i < n: planes[p * n + i], p < a.planes, the highest byte
// first (ActQuant: c = (q - z) - offset = 256 * h + l, or 65536 * h + 256 * m + l, lower bytes stored minus 128).
void quantize_wide(const ActQuant& a, const float* x, int8_t* planes, int64_t n);

// rescale() of a wide quantizer's byte planes' sums acc[p * plane_stride + i], p < nplanes (2 or 3, the highest
// first): acc = sum over p of 256^(nplanes - 1 - p) * acc_p + corr[j], in float64 (exact: integers < 2^53).
void rescale_wide(const int32_t* acc, int nplanes, int64_t plane_stride, float* out, int64_t outer, int64_t channels,
                  int64_t inner, const int64_t* corr, const double* s, const double* b, bool relu = false);

// One output channel's float32 form of rescale(): exact (ok) when y = float32(double(acc + corr) * S + B) equals
// fma(float32(acc + c), s, b) (one float32 rounding of the exact value) for every |acc| within the channel's bound:
// S a power of two in float32's normal range (s = S), B a float32 value (b = B), |acc| + |corr| <= 2^24 (so
// acc + c is exact in int32 and in float32, c = corr), and the exact value v * S + B held by float64 (its bits span
// at most 52, a margin on 53) with no subnormal float32 result (every nonzero one a multiple of at least 2^-126). Then the float64
// formula rounds once too, the same value: same bits. QKeras' and hls4ml's layers (power-of-two scales) have it.
struct Exact32 {
  float s = 0.f, b = 0.f;
  int32_t c = 0;
  bool ok = false;
};
std::vector<Exact32> exact32_coeffs(const int64_t* corr, const double* s, const double* b, const int64_t* bound,
                                    int64_t n);
// rescale() of [rows][n] sums (inner 1) for channels whose Exact32 is all ok, from its parts as channel arrays:
// out[r * n + j] = fma(float32(acc[r * n + j] + c[j]), s[j], b[j]), then with relu y < 0 ? 0 : y.
void rescale_rows_exact32(const int32_t* acc, float* out, int64_t rows, int64_t n, const int32_t* c, const float* s,
                          const float* b, bool relu);

// out[(o * channels + j) * inner + p] = float32(double(acc[same] + corr[j]) * S[j] + B[j]), then with relu
// y < 0 ? 0 : y.
void rescale(const int32_t* acc, float* out, int64_t outer, int64_t channels, int64_t inner, const int64_t* corr,
             const double* s, const double* b, bool relu = false);

// One output channel's coefficients for rescale_codes_isa's vector loop (codes_fast()):
// u = fma(acc, a, c) + fma(acc, a_lo, c_lo) (acc as float32; a + a_lo and c + c_lo: float64 coefficients split into
// two float32 parts) approximates q + shift, where q = x / s + z is the real value the quantizer rounds (before
// clamping) and shift moves its rounding boundaries to the integers (0.5 for the nearest modes, 0 for floor, 1 for
// ceil), within e wherever it matters (|u| <= max(|lo|, |hi|) + 2). A value within e of an integer takes the exact
// formula; e >= 1 makes every value do. relu_at = z + shift, the u of the value 0.
// An exact channel (e = 0: power-of-two quantizer scale and coefficients whose every value is exact in float32) has
// u = q + shift exactly, so u an integer is a tie of the rounding mode, resolved by `tie` (floor(u) - 1 when the mode
// rounds it down). With a fused LeakyRelu, the values below 0 (u < relu_at) take the second set: n_a, n_a_lo, n_c,
// n_c_lo (alpha times the first, with z + shift) within n_e (0: exact as well); a value within e of relu_at takes
// the exact formula. For the modes `exact` names (1 half-even, 2 floor, 3 ceil, 4 half-up, 5 half-down) on a channel
// exact on every side, the loop rounds q = fma(acc, a, cq) (or fma(acc, n_a, n_cq) below z; cq = c - shift) by the
// mode itself instead.
struct CodesFast {
  enum Tie : uint8_t { kNone, kDown, kEven, kAway, kTowardZero };  // kNone: ties round up (or no boundary)
  float a = 0.f, a_lo = 0.f, c = 0.f, c_lo = 0.f, e = 2.f, relu_at = 0.f, cq = 0.f;
  float n_a = 0.f, n_a_lo = 0.f, n_c = 0.f, n_c_lo = 0.f, n_e = 2.f, n_cq = 0.f;
  float e_r = 2.f;  // the bound e of a channel, exact or not, for the values a residual is added to
  Tie tie = kNone;
  uint8_t exact = 0;
};
// The coefficients of channels j < n for the quantizer q of the values of rescale_codes() below (bound, relu and
// leaky as there); a channel the vector loop cannot take gets e = 2.
std::vector<CodesFast> codes_fast(const ActQuant& q, const int64_t* corr, const double* s, const double* b,
                                  const int64_t* bound, std::optional<float> leaky, int64_t n);
// The codes of rescaled sums, as rescale() then quantize_codes(q) would write them, from a grid of int32 sums:
// codes[(j * rows + r) * width + p] is the code of y = float32(double(acc[(j * rows + r) * stride + p] + corr[j]) *
// s[j] + b[j]), after a fused leaky (y >= 0 ? y : float32(alpha * y)), then the residual (y = float32(y + resid[same
// index as the code]), optional), then relu (y < 0 ? 0 : y). Every |acc| of channel j must be at most bound[j]
// (QConv: 128 * sum |w_j|). The AVX2 and AVX-512 paths compute most codes in float32 from per-channel coefficients
// and take the exact formula for every group of 8 values one of which lies near a rounding boundary
// (rescale_codes_isa); the scalar path, a LeakyRelu with a residual, the bipolar quantizer and the rounding modes
// toward zero, away from zero and QONNX UP take the exact formula throughout. Same bits on every path.
// fast: codes_fast() of these channels (computed here when null).
void rescale_codes(const int32_t* acc, int64_t stride, int8_t* codes, int64_t channels, int64_t rows, int64_t width,
                   const int64_t* corr, const double* s, const double* b, const int64_t* bound, bool relu,
                   std::optional<float> leaky, const float* resid, const ActQuant& q,
                   const CodesFast* fast = nullptr);
// codes_fast() of n channels as arrays, one value per channel, padded to a multiple of 8 (rescale_codes_rows' vector
// loop takes 8 channels of a row at a time). tie: the ties' rule of the exact channels (one quantizer, one rule; the
// channels that are not exact have e > 0 and flag every integer u). vector: every channel has e < 1 (a channel with
// e >= 1 would send every value to the exact formula: then the whole layer takes it, as pieces of rows).
struct CodesFastRows {
  std::vector<float> a, a_lo, c, c_lo, e, e1;  // e1 = 1 - e
  CodesFast::Tie tie = CodesFast::kNone;
  bool vector = false;
};
CodesFastRows codes_fast_rows(const std::vector<CodesFast>& f);
// The codes of a [rows][n] matrix of sums, channel j along the row (QGemm): codes[r * n + j] is the code of
// y = float32(double(acc[r * n + j] + corr[j]) * s[j] + b[j]) (then relu: y < 0 ? 0 : y) under q, as rescale() then
// quantize_codes(q) would write it. fast: codes_fast_rows() of these channels, or null (the exact formula). Same bits
// on every path.
void rescale_codes_rows(const int32_t* acc, int64_t rows, int64_t n, int8_t* codes, const int64_t* corr,
                        const double* s, const double* b, bool relu, const ActQuant& q, const CodesFastRows* fast);
// The float-exact backend (QuantCodes / Rescale ops around onnxruntime's own float Conv / Gemm / MatMul): the
// integer values q - z as float32, and the rescale of integer-valued float32 sums. Exact when every partial sum
// is an integer below 2^24 in magnitude (the transform checks K * max|a| * max|w| < 2^24).
void quantize_values(const ActQuant& a, const float* x, float* v, int64_t n);

// The tolerance of off_grid, in code steps: qonnx's own when it rounds tensors annotated with an integer type.
inline constexpr double kGridTolerance = 0.01;
// The index of the first x[i] (i < n) that is not within kGridTolerance of a code of `a`: t = x / scale + zeropt
// (float64) must be finite, within the tolerance of an integer q, and q in [lo, hi] (bipolar: |t| within the
// tolerance of 1). -1 when every value is on the grid. Rounding such values gives codes whose exact sums are what
// the float layer computes from them; the layers of a grid that a graph input's declared type only promises check
// their input with it.
int64_t off_grid(const ActQuant& a, const float* x, int64_t n);
void rescale_f32(const float* acc, float* out, int64_t outer, int64_t channels, int64_t inner, const int64_t* corr,
                 const double* s, const double* b, bool relu);

// A quantized 2-D convolution (NCHW float in, NCHW float out) with weight codes [m][c/group][kh][kw]. With a
// weight codes all -1 or +1 and a bipolar or 1- to 2-bit activation it runs on bit kernels (xnor.h: XNOR-popcount or
// bit-serial AND-popcount), with the same output bits.
class QConv {
 public:
  // relu: a standard Relu on the output, fused into the rescale. xnor: a binary-weight layer may take the bit
  // kernels (false: always the int8 engine).
  // w_shift (empty, or one value per output channel): the layer's weight codes are w[j][k] + w_shift[j], wider
  // than int8 (e.g. 8-bit weights with a per-channel zero point: q - z in [-255, 255]) while each channel's span
  // fits int8 around its shift. The engine multiplies the int8 w[j][k] and adds w_shift[j] times the window's sum
  // of stored activation codes (every tap, padding included), computed per output pixel and group from the input
  // codes, to each sum before the rescale: the same int32 sums as weights of w + w_shift would give, exactly (the
  // sums wrap modulo 2^32, the true value fits: 128 * sum_k |w + w_shift| < 2^31 is checked here). Not with a 9- to
  // 24-bit activation quantizer, and never on the bit kernels.
  QConv(const int8_t* w, int64_t m, int64_t cg, const conv::ConvAttrs& a, const ActQuant& act,
        std::vector<double> s, std::vector<double> b, bool relu = false, bool xnor = true,
        std::vector<int32_t> w_shift = {});
  Shape output_shape(const Shape& x) const;
  // The layer's input: float32 values (quantized here by the layer's quantizer), or `codes`: the stored codes of
  // that quantizer (act(): c = (q - z) - offset, what quantize_codes(act(), x) writes), e.g. a previous QConv's
  // Out::codes. Codes always run on the int8 engine (never the bit kernels); a wide quantizer has no codes.
  struct In {
    const float* x = nullptr;
    const int8_t* codes = nullptr;
  };
  // The layer's output: float32 values `y`, or `codes` (with `quant`): quantize_codes(*quant) of the same float32
  // values, written without storing them (each piece of rows is rescaled into an L1 buffer and quantized from there).
  struct Out {
    float* y = nullptr;
    int8_t* codes = nullptr;
    const ActQuant* quant = nullptr;
    // With codes, optional: 256 stored codes; each code c written becomes table[c + 128] (map_codes).
    const int8_t* table = nullptr;
    bool table_small = false;  // every code `quant` writes lies in [0, 15] (map_codes' `small`)
    // With y only: y is channels-last, [N, OH, OW, M] (the same values at y[((n * OH + i) * OW + k) * M + j]).
    bool channels_last = false;
    int64_t plane = 0;  // set by run(): OH * OW
    // Optional, not with channels_last: a residual added to the output values (after the rescale and a LeakyRelu)
    // before they are stored or quantized, float32 in the output's layout [N, M, OH, OW]; resid_relu: a Relu after
    // that addition.
    const float* resid = nullptr;
    bool resid_relu = false;
  };
  void run(In in, const Shape& xs, Out out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const;
  void run(const float* x, const Shape& xs, float* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const {
    run(In{x, nullptr}, xs, Out{out, nullptr, nullptr}, par, kernel);
  }
  // The quantizer of the layer's input as it stores codes (nonneg_codes of the one given).
  const ActQuant& act() const { return act_; }
  // A standard LeakyRelu on the output, fused: y = y >= 0 ? y : float32(alpha * y), after the rescale (the layer
  // must have no relu). Set before the first run.
  void set_leaky_relu(float alpha);
  // The quantizer of the codes run() will write (Out::quant): the codes epilogue's per-channel coefficients
  // (codes_fast) computed once here instead of in every run. Optional; set before the first run.
  void set_output_quant(const ActQuant& q);
  // True for a binary-weight layer on the bit kernels: run() with kernel kAuto takes them. bit_planes(): 0 for
  // XNOR-popcount (bipolar activation), 1 or 2 for bit-serial.
  bool uses_xnor() const { return xnor_.has_value(); }
  int bit_planes() const { return planes_; }

  // How many ranges of images run() splits a batch of inputs of shape xs into, one thread-pool task each (every range
  // at least 2^22 multiply-adds; 1: no split, the images' steps are split over the pool instead). A caller that
  // handles the images itself (a fused pool) can split them the same way.
  int64_t batch_tasks(const Shape& xs) const;

 private:
  conv::ConvAttrs a_;  // as given (pads of the float convolution)
  // offset != 0 and padded (but not a depthwise layer, see needs_explicit_pad): the codes are padded here with
  // -offset, the engine gets no pads
  bool explicit_pad_;
  int64_t m_, cg_;
  ActQuant act_;
  std::vector<double> s_, b_;
  std::vector<int64_t> corr_;
  std::vector<int64_t> acc_bound_;  // per channel: 128 * sum |w|, a bound on the engine's |acc| (codes epilogue)
  std::vector<Exact32> exact32_;    // per channel: the float32 rescale of float outputs where it is exact
  bool any_exact32_ = false;
  // A 1x1, stride-1, unpadded, ungrouped layer of at most kSmallK input channels: its weight codes [m][cg]. With the
  // engine kernel left to the layer (kAuto), run_small_k computes the sums straight (small_k_sums_isa) instead of
  // packing a GEMM whose every step would be a single reduction group.
  static constexpr int64_t kSmallK = 4;
  std::vector<int8_t> small_w_;
  bool relu_;
  std::optional<float> leaky_;  // set_leaky_relu
  std::optional<ActQuant> out_q_;  // set_output_quant, with its coefficients out_fast_
  std::vector<CodesFast> out_fast_;
  conv::Conv2d conv_;
  // The binary-weight layer's weight bits: run() with kernel kAuto takes the bit kernels (xnor.h); a forced engine
  // kernel still runs the int8 engine (tests compare the two). planes_: 0 = XNOR-popcount, else bit-serial planes.
  std::optional<XnorWeights> xnor_;
  int planes_ = 0;
  std::vector<uint64_t> pad_planes_;  // bit-serial: the padding code's planes, [planes][words]
  std::vector<int64_t> zero_corr_;
  std::vector<int32_t> shift_;  // w_shift (empty: none)
  void run_planes(const float* x, const Shape& xs, const Shape& os, float* out, const gemm::Parallel& par) const;
  void run_xnor(const float* x, const Shape& xs, const Shape& os, float* out, const gemm::Parallel& par) const;
  // run() on a batch it does not split: every path but the batch split.
  void run_images(In in, const Shape& xs, const Shape& os, Out out, const gemm::Parallel& par,
                  gemm::Kernel kernel) const;
  void run_engine(In in, const Shape& xs, const Shape& os, Out out, const gemm::Parallel& par,
                  gemm::Kernel kernel) const;
  void run_small_k(const int8_t* codes, const Shape& xs, Out out, const gemm::Parallel& par,
                   const int32_t* tsum) const;
  void run_bands(const int8_t* codes, const Shape& xs, const Shape& os, int64_t band, Out out,
                 const gemm::Parallel& par, gemm::Kernel kernel, const int32_t* tsum) const;
  // With w_shift: the window sums of stored input codes, [N][group][OH * OW] (a per-thread buffer of the caller).
  const int32_t* window_code_sums(const int8_t* codes, const Shape& xs, const Shape& os) const;
  // Rescales the sums of `channels` channels from j0 (a RawSink grid: acc[(j * rows + r) * stride + p]) into the
  // output at element `at` (+ (j * rows + r) * width + p), as float32 or as codes. tsum: window_code_sums() of the
  // run, with w_shift (the sums get w_shift[j] times the window sum of their pixel first), else null.
  void emit(const Out& out, int64_t at, const int32_t* acc, int64_t stride, int64_t j0, int64_t channels,
            int64_t rows, int64_t width, const int32_t* tsum = nullptr) const;
  // emit() of channels [j0, j0 + channels) whose rows x width rectangles start `plane` values apart in the output
  // (at + (j - j0) * plane: an image's output plane), split into ranges of channels that the pool's threads rescale
  // at once. For sinks called on the calling thread after the engine's parallel GEMM.
  void emit_channels(const gemm::Parallel& par, const Out& out, int64_t at, int64_t plane, const int32_t* acc,
                     int64_t stride, int64_t j0, int64_t channels, int64_t rows, int64_t width,
                     const int32_t* tsum) const;
  void run_wide(const float* x, const Shape& xs, const Shape& os, float* out, const gemm::Parallel& par,
                gemm::Kernel kernel) const;
};

// A quantized matrix product y[r][j] = rescale(sum_k a(x[r][k]) * W[j][k]), weight codes [n][k]; 1-bit layers
// on XNOR-popcount as QConv.
class QGemm {
 public:
  // w_shift: as QConv's (the weight codes are w[j][k] + w_shift[j]); each row's sums get w_shift[j] times the row's
  // sum of stored activation codes.
  QGemm(const int8_t* w, int64_t n, int64_t k, const ActQuant& act, std::vector<double> s, std::vector<double> b,
        bool relu = false, bool xnor = true, std::vector<int32_t> w_shift = {});
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // The quantizer of the layer's input as it stores codes (nonneg_codes of the one given).
  const ActQuant& act() const { return act_; }
  // The input: float32 values x [rows][k], or `codes`: the stored codes of act() (as QConv::In; a previous layer's
  // output codes). Codes run on the int8 engine; a wide quantizer has no codes.
  using In = QConv::In;
  // The output [rows][n]: float32 values `y`, or `codes`: the codes of set_output_quant()'s quantizer of those values
  // (the engine's sums go straight to codes, rescale_codes_rows; the bit kernels and byte planes quantize their
  // float32 output).
  struct Out {
    float* y = nullptr;
    int8_t* codes = nullptr;
  };
  void run(In in, int64_t rows, Out out, const gemm::Parallel& par, gemm::Kernel kernel = gemm::Kernel::kAuto) const;
  void run(const float* x, int64_t rows, float* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const {
    run(In{x, nullptr}, rows, Out{out, nullptr}, par, kernel);
  }
  // The quantizer of the codes run() writes with Out::codes (an int8 quantizer; its coefficients computed once
  // here). Set before the first run.
  void set_output_quant(const ActQuant& q);
  bool uses_xnor() const { return xnor_.has_value(); }  // as QConv::uses_xnor
  int bit_planes() const { return planes_; }

 private:
  int64_t n_, k_;
  ActQuant act_;
  std::vector<double> s_, b_;
  std::vector<int64_t> corr_;
  bool relu_;
  gemm::PackedWeights packed_;
  std::optional<XnorWeights> xnor_;  // as in QConv
  int planes_ = 0;
  std::vector<int64_t> zero_corr_;
  std::vector<int64_t> acc_bound_;  // per channel: 128 * sum |w| (as QConv's)
  std::vector<int32_t> shift_;      // w_shift (empty: none)
  // Every channel's Exact32 ok: float outputs rescaled in float32 from these (channel arrays, the vector loop's
  // operands); empty otherwise.
  std::vector<int32_t> e_c_;
  std::vector<float> e_s_, e_b_;
  void rescale_rows(const int32_t* acc, int64_t rows, float* out) const;  // the float output's rescale
  std::optional<ActQuant> out_q_;   // set_output_quant, with out_fast_
  CodesFastRows out_fast_;
  void run_values(const float* x, int64_t rows, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const;
  void run_xnor(const float* x, int64_t rows, float* out, const gemm::Parallel& par) const;
  void run_planes(const float* x, int64_t rows, float* out, const gemm::Parallel& par) const;
  void run_wide(const float* x, int64_t rows, float* out, const gemm::Parallel& par, gemm::Kernel kernel) const;
};

}  // namespace ortquant::integer
