// ortquant.integer::QConv and QGemm: a QONNX quantized layer fused into one op by integer mode (the graph
// transform python/ortquant/transforms/lower_integer.py writes them). X float32; W int8 weight codes, S and B
// float64 per output channel, all three constant initializers; the activation quantizer as act_* attributes.
// The math is core/integer/qlayer.h; this file only reads attributes, validates and calls it.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/integer/depth_to_space.h"
#include "core/integer/pool.h"
#include "core/integer/qlayer.h"
#include "core/integer/residual.h"
#include "ort/kernels/integer/integer_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
constexpr ONNXTensorElementDataType kF64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;

}  // namespace

integer::ActQuant integer_act_quant(const KernelInfo& info, const std::string& prefix) {
  auto name = [&prefix](const char* a) { return prefix + a; };
  const float scale = info.attr_float(name("scale").c_str());
  const float zeropt = info.attr_float(name("zeropt").c_str(), 0.f);
  const bool bipolar = info.attr_bool(name("bipolar").c_str(), false);
  const int64_t bits = info.attr_int(name("bits").c_str(), bipolar ? 1 : 8);
  const bool is_signed = info.attr_bool(name("signed").c_str(), true);
  const bool narrow = info.attr_bool(name("narrow").c_str(), false);
  const std::string mode_name = info.attr_string(name("rounding_mode").c_str(), "ROUND");
  RoundMode mode;
  if (!parse_qonnx_round_mode(mode_name, &mode))
    throw_error("attribute '", name("rounding_mode"), "': unknown rounding mode '", mode_name, "'");
  return integer::make_act_quant(scale, zeropt, bits, is_signed, narrow, mode, bipolar);
}

void check_on_grid(const std::string& declared, const integer::ActQuant& a, const float* x, int64_t n) {
  if (declared.empty()) return;
  const int64_t i = integer::off_grid(a, x, n);
  if (i < 0) return;
  std::ostringstream v;
  v.precision(9);
  v << x[i];
  throw_error("input X holds ", v.str(), " at flat index ", i, ", off the grid ", a.scale, " * (q - ", a.zeropt,
              "), q an integer in [", a.lo, ", ", a.hi, "] (by more than ", integer::kGridTolerance, " of a step): "
              "integer mode reads this layer's input as integer codes because the model declares ", declared,
              "; feed values of that type, or prepare the model without integer mode");
}

namespace {

// A constant input of the given dtype; throws naming it otherwise.
OwnedTensor constant(const KernelInfo& info, size_t i, ONNXTensorElementDataType dtype, const char* what) {
  std::optional<OwnedTensor> t = info.constant_input(i);
  if (!t) throw_error("input ", what, " must be a constant initializer");
  if (t->dtype != dtype) throw_error("input ", what, " must be ", dtype_name(dtype), ", got ", dtype_name(t->dtype));
  return std::move(*t);
}

std::vector<double> channel_values(const KernelInfo& info, size_t i, const char* what, int64_t n) {
  const OwnedTensor t = constant(info, i, kF64, what);
  if (t.view().size() != n)
    throw_error("input ", what, " must have ", n, " values (one per output channel), got shape ", shape_str(t.shape));
  const double* d = t.view().as<double>();
  return std::vector<double>(d, d + n);
}

gemm::Parallel parallel(const KernelContext& ctx) {
  return [&ctx](size_t n, const gemm::TaskFn& fn) { ctx.parallel_for(n, fn); };
}

std::vector<int64_t> ints(const KernelInfo& info, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = info.attr_ints(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n) throw_error("attribute '", name, "' must have ", n, " values, got ", v.size());
  return v;
}

// Attribute w_shift of QConv / QGemm: absent, or one integer per output channel (weight codes W[j] + w_shift[j]; the
// layer checks what its sums need).
std::vector<int32_t> weight_shift(const KernelInfo& info, int64_t m) {
  std::vector<int32_t> shift;
  if (!info.has_attr("w_shift")) return shift;
  const std::vector<int64_t> v = info.attr_ints("w_shift", {});
  if (static_cast<int64_t>(v.size()) != m)
    throw_error("attribute 'w_shift' must have one value per output channel (", m, "), got ", v.size());
  for (const int64_t d : v) {
    if (d < -(int64_t{1} << 16) || d > (int64_t{1} << 16))
      throw_error("attribute 'w_shift': value ", d, " is outside [-65536, 65536]");
    shift.push_back(static_cast<int32_t>(d));
  }
  return shift;
}

// Attribute act_channel_scales of QConv: one activation scale per input channel (a depthwise layer reading a
// per-channel quantizer: transforms/lower_integer.py), each the quantizer of act_* with that scale. At most 8-bit,
// not bipolar: the int8 codes of every channel share act_*'s range and offset, which the layer's sums use.
std::vector<integer::ActQuant> channel_act_quants(const KernelInfo& info, const integer::ActQuant& act,
                                                  int64_t cg) {
  if (act.wide || act.bipolar)
    throw_error("attribute 'act_channel_scales' takes an activation quantizer of at most 8 bits, not bipolar");
  if (cg != 1)
    throw_error("attribute 'act_channel_scales' takes a depthwise layer (one input channel per group), got ", cg,
                " input channels per group");
  const int64_t channels = info.attr_int("group", 1);  // = the input channels
  const std::vector<float> scales = info.attr_floats("act_channel_scales", {});
  if (static_cast<int64_t>(scales.size()) != channels)
    throw_error("attribute 'act_channel_scales' must have one scale per input channel (", channels, "), got ",
                scales.size());
  std::vector<integer::ActQuant> out(scales.size(), act);  // the scale is the only field that differs
  for (size_t c = 0; c < scales.size(); ++c) {
    if (!(std::isfinite(scales[c]) && scales[c] > 0.f))
      throw_error("attribute 'act_channel_scales': scale ", scales[c], " is not finite and positive");
    out[c].scale = scales[c];
  }
  return out;
}

class QConvKernel : public OpKernel {
 public:
  // codes_op: QConvCodes (the output as the int8 codes of the out_act_* quantizer), else QConv.
  QConvKernel(const KernelInfo& info, bool codes_op) {
    const integer::ActQuant act = integer_act_quant(info);
    check_ = info.attr_string("act_check", "");
    const OwnedTensor w = constant(info, 1, kI8, "W");
    if (w.shape.size() != 4) throw_error("input W must be 4-D [M, C/group, kH, kW], got shape ", shape_str(w.shape));
    if (info.has_attr("act_channel_scales")) channel_acts_ = channel_act_quants(info, act, w.shape[1]);
    const std::vector<int64_t> ks = info.attr_ints("kernel_shape", {});
    if (!ks.empty() && (ks.size() != 2 || ks[0] != w.shape[2] || ks[1] != w.shape[3]))
      throw_error("attribute 'kernel_shape' ", shape_str(ks), " does not match the weight shape ", shape_str(w.shape));
    const auto st = ints(info, "strides", 2, 1), di = ints(info, "dilations", 2, 1), pa = ints(info, "pads", 4, 0);
    conv::ConvAttrs a;
    a.kh = w.shape[2], a.kw = w.shape[3];
    a.sh = st[0], a.sw = st[1];
    a.dh = di[0], a.dw = di[1];
    a.pt = pa[0], a.pl = pa[1], a.pb = pa[2], a.pr = pa[3];
    a.group = info.attr_int("group", 1);
    conv::validate_attrs(a, false);
    const int64_t m = w.shape[0];
    if (m == 0) throw_error("input W has no output channel (shape ", shape_str(w.shape), ")");
    if (m % a.group != 0) throw_error("the weight's ", m, " output channels are not a multiple of group ", a.group);
    // With a residual input R the Relu comes after the addition (y = relu(conv + R)), so the convolution runs without.
    residual_ = info.has_input(4);
    relu_ = info.attr_bool("relu", false);
    conv_.emplace(w.view().as<int8_t>(), m, w.shape[1], a, act, channel_values(info, 2, "S", m),
                  channel_values(info, 3, "B", m), relu_ && !residual_, info.attr_bool("xnor", true),
                  weight_shift(info, m));
    if (info.has_attr("leaky_relu_alpha")) {  // the LeakyRelu right after the convolution (before R and the relu)
      if (relu_ && !residual_)
        throw_error("attributes 'relu' and 'leaky_relu_alpha' cannot both apply to the convolution's output");
      const float alpha = info.attr_float("leaky_relu_alpha");
      if (!std::isfinite(alpha)) throw_error("attribute 'leaky_relu_alpha' must be finite, got ", alpha);
      conv_->set_leaky_relu(alpha);
    }
    const std::vector<int64_t> pool = info.attr_ints("pool", {1, 1});
    if (pool.size() != 2 || pool[0] < 1 || pool[1] < 1 || pool[0] > kMaxPool || pool[1] > kMaxPool)
      throw_error("attribute 'pool' must be 2 window sizes [pH, pW] in 1..", kMaxPool, ", got ", shape_str(pool));
    ph_ = pool[0], pw_ = pool[1];
    bs_ = info.attr_int("depth_to_space", 1);
    if (bs_ < 1 || bs_ > kMaxBlock)
      throw_error("attribute 'depth_to_space' must be a block size in 1..", kMaxBlock, ", got ", bs_);
    if (m % (bs_ * bs_) != 0)
      throw_error("attribute 'depth_to_space' ", bs_, ": the ", m, " output channels are not a multiple of ", bs_ * bs_);
    const std::string mode = info.attr_string("depth_to_space_mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      throw_error("attribute 'depth_to_space_mode' must be DCR or CRD, got '", mode, "'");
    crd_ = mode == "CRD";
    if (bs_ > 1 && (ph_ > 1 || pw_ > 1))
      throw_error("attributes 'pool' and 'depth_to_space' cannot be combined (one fused step after the convolution)");
    if (codes_op != info.has_attr("out_act_scale"))
      throw_error(codes_op ? "QConvCodes needs the attributes 'out_act_*' (at least out_act_scale): the quantizer "
                             "of its int8 output codes"
                           : "attribute 'out_act_scale' belongs to QConvCodes (int8 output codes); QConv's output "
                             "is float32");
    if (info.has_attr("residual_act_scale")) {  // R given as the int8 codes of this quantizer
      if (!residual_) throw_error("attributes 'residual_act_*' need the residual input R");
      r_q_ = integer::nonneg_codes(integer_act_quant(info, "residual_act_"));
      if (r_q_->wide)
        throw_error("attributes 'residual_act_*': codes take a quantizer of at most 8 bits, got ",
                    info.attr_int("residual_act_bits", 8));
    }
    if (codes_op) {
      out_q_ = integer::nonneg_codes(integer_act_quant(info, "out_act_"));
      if (out_q_->wide)
        throw_error("attributes 'out_act_*': output codes take a quantizer of at most 8 bits, got ",
                    info.attr_int("out_act_bits", 8));
      conv_->set_output_quant(*out_q_);
    }
    channels_last_ = info.attr_bool("channels_last", false);
    if (channels_last_ && (codes_op || residual_ || ph_ > 1 || pw_ > 1 || bs_ > 1))
      throw_error("attribute 'channels_last' (a [N, OH, OW, M] output) takes a QConv without output codes, residual "
                  "R, fused pool or depth_to_space");
    if (info.has_attr("out_table")) {  // each output code c written as out_table[c + 128]
      if (!codes_op) throw_error("attribute 'out_table' belongs to QConvCodes (a map of its int8 output codes)");
      const std::vector<int64_t> t = info.attr_ints("out_table", {});
      if (t.size() != 256) throw_error("attribute 'out_table' must have 256 values (one per int8 code), got ", t.size());
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] < -128 || t[i] > 127)
          throw_error("attribute 'out_table': value ", i, " is ", t[i], ", not an int8 code in [-128, 127]");
        table_[i] = static_cast<int8_t>(t[i]);
      }
      has_table_ = true;
      const int32_t top = integer::nonneg_max(*out_q_);  // the codes written lie in [0, top] when top >= 0
      table_small_ = top >= 0 && top <= 15;
    }
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    if (x.dtype != kFloat && x.dtype != kI8)
      throw_error("input X must be float32 values or int8 codes (of a QConv with out_act_* attributes), got ",
                  dtype_name(x.dtype));
    if (x.shape.size() != 4) throw_error("input X must be 4-D [N, C, H, W], got shape ", shape_str(x.shape));
    const Shape cs = conv_->output_shape(x.shape);
    const bool pool = ph_ != 1 || pw_ != 1;
    if (pool && (cs[2] < ph_ || cs[3] < pw_))
      throw_error("the convolution's output is ", cs[2], " x ", cs[3], ", smaller than the fused max pool window ",
                  ph_, " x ", pw_);
    const bool d2s = bs_ > 1;
    Shape os = pool ? Shape{cs[0], cs[1], cs[2] / ph_, cs[3] / pw_} : cs;
    if (channels_last_) os = {cs[0], cs[2], cs[3], cs[1]};
    if (d2s) os = {cs[0], cs[1] / (bs_ * bs_), checked_mul(cs[2], bs_, "output height"), checked_mul(cs[3], bs_, "output width")};
    const std::optional<TensorView> r = residual_ ? ctx.input(4) : std::nullopt;
    if (r) {
      if (r->dtype == kI8 && !r_q_)
        throw_error("input R is int8 codes but the attributes 'residual_act_*' (their quantizer) are missing");
      if (r->dtype != kI8) expect_dtype(*r, kFloat, "input R");
      if (r->shape != os)
        throw_error("input R (the residual added to the output) has shape ", shape_str(r->shape),
                    ", the output's is ", shape_str(os));
    }
    bool codes_in = x.dtype == kI8;
    const bool codes_out = out_q_.has_value();
    const int8_t* x_codes = codes_in ? x.as<int8_t>() : nullptr;
    thread_local std::vector<int8_t> t_channel_codes;
    if (!codes_in && !channel_acts_.empty()) {  // act_channel_scales: each channel's plane by its own quantizer
      if (x.shape[1] != static_cast<int64_t>(channel_acts_.size()))
        throw_error("input X has ", x.shape[1], " channels; attribute 'act_channel_scales' has one scale per input "
                    "channel (", channel_acts_.size(), ")");
      const int64_t n = shape_size(x.shape), plane = x.shape[2] * x.shape[3], planes = x.shape[0] * x.shape[1];
      if (t_channel_codes.size() < static_cast<size_t>(n)) t_channel_codes.resize(static_cast<size_t>(n));
      int8_t* codes = t_channel_codes.data();
      const float* xf = x.as<float>();
      // pool tasks of at least kQuantTask values each (one plane's quantizer call per plane)
      const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(planes, n / kQuantTask));
      ctx.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
        const int64_t p0 = planes * static_cast<int64_t>(t) / tasks, p1 = planes * static_cast<int64_t>(t + 1) / tasks;
        for (int64_t i = p0; i < p1; ++i)
          integer::quantize_codes(channel_acts_[static_cast<size_t>(i % x.shape[1])], xf + i * plane,
                                  codes + i * plane, plane);
      });
      x_codes = codes;
      codes_in = true;
    }
    if (!codes_in) check_on_grid(check_, conv_->act(), x.as<float>(), shape_size(x.shape));
    float* y = codes_out ? nullptr : ctx.output_as<float>(0, os);
    int8_t* yc = codes_out ? ctx.output_as<int8_t>(0, os) : nullptr;
    if (shape_size(os) == 0) return;
    const int64_t in_each = shape_size({1, x.shape[1], x.shape[2], x.shape[3]});
    auto input_of = [&](int64_t b) {
      return codes_in ? integer::QConv::In{nullptr, x_codes + b * in_each}
                      : integer::QConv::In{x.as<float>() + b * in_each, nullptr};
    };
    const gemm::Parallel par = parallel(ctx);
    const bool r_codes = r && r->dtype == kI8;
    thread_local std::vector<float> t_conv, t_image, t_resid;
    if (!pool && !d2s) {  // the residual (int8 codes dequantized first) added as the layer writes its output
      integer::QConv::Out o{y, yc, codes_out ? &*out_q_ : nullptr, has_table_ ? table_.data() : nullptr,
                            table_small_, channels_last_};
      if (r) {
        const int64_t n = shape_size(os);
        if (r_codes) {
          if (t_resid.size() < static_cast<size_t>(n)) t_resid.resize(static_cast<size_t>(n));
          integer::dequantize_codes(*r_q_, r->as<int8_t>(), t_resid.data(), n);
        }
        o.resid = r_codes ? t_resid.data() : r->as<float>();
        o.resid_relu = relu_;
      }
      conv_->run(input_of(0), x.shape, o, par);
      return;
    }
    // The fused max pool or pixel shuffle and the residual add, image by image: the convolution's output (into a
    // buffer) is pooled or shuffled and added to while it is in cache; output codes are the image's float32 result
    // quantized. A max pool of output codes without R pools the codes themselves where the image's planes are large
    // enough for the codes loop (kPoolCodesPlane; measured: a 12 x 12 plane is faster quantized after the pool): the
    // quantizer is non-decreasing, so the code of a window's max is the max of its codes (the convolution writes
    // codes, a quarter of the bytes).
    const Shape xs1 = {1, x.shape[1], x.shape[2], x.shape[3]};
    const int64_t conv_each = shape_size({1, cs[1], cs[2], cs[3]});
    const int64_t out_each = shape_size({1, os[1], os[2], os[3]});
    // A batch split as QConv::run splits one (QConv::batch_tasks): ranges of images are the pool's tasks, each image
    // convolved single-threaded and pooled / shuffled / added to in its thread's buffers.
    const int64_t tasks = conv_->batch_tasks(x.shape);
    const gemm::Parallel inline_par(&gemm::run_inline);
    const gemm::Parallel& conv_par = tasks > 1 ? inline_par : par;
    const auto images = [&](const auto& image) {
      if (tasks > 1)
        return par(static_cast<size_t>(tasks), [&](size_t t) {
          const int64_t n = cs[0];
          const int64_t b0 = n * static_cast<int64_t>(t) / tasks, b1 = n * static_cast<int64_t>(t + 1) / tasks;
          for (int64_t b = b0; b < b1; ++b) image(b);
        });
      for (int64_t b = 0; b < cs[0]; ++b) image(b);
    };
    const auto sized = [](auto& v, int64_t n) {
      if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
      return v.data();
    };
    if (pool && codes_out && !r && cs[2] * cs[3] >= kPoolCodesPlane) {
      images([&](int64_t b) {
        thread_local std::vector<int8_t> t_conv_codes;
        int8_t* conv_codes = sized(t_conv_codes, conv_each);
        int8_t* yb = yc + b * out_each;
        conv_->run(input_of(b), xs1, {nullptr, conv_codes, &*out_q_}, conv_par);
        integer::max_pool_windows(conv_codes, cs[1], cs[2], cs[3], ph_, pw_, yb);
        if (has_table_) integer::map_codes(table_.data(), yb, out_each, table_small_);
      });
      return;
    }
    const bool staged = pool || d2s;
    images([&](int64_t b) {
      float* conv = staged ? sized(t_conv, conv_each) : nullptr;
      float* yb = codes_out ? sized(t_image, out_each) : y + b * out_each;
      float* resid = r_codes ? sized(t_resid, out_each) : nullptr;
      conv_->run(input_of(b), xs1, {staged ? conv : yb, nullptr, nullptr}, conv_par);
      if (pool) integer::max_pool_windows(conv, cs[1], cs[2], cs[3], ph_, pw_, yb);
      if (d2s) integer::depth_to_space(conv, cs[1], cs[2], cs[3], bs_, crd_, yb);
      if (r_codes) integer::dequantize_codes(*r_q_, r->as<int8_t>() + b * out_each, resid, out_each);
      if (r) integer::add_residual(yb, r_codes ? resid : r->as<float>() + b * out_each, out_each, relu_);
      if (codes_out) integer::quantize_codes(*out_q_, yb, yc + b * out_each, out_each);
      if (codes_out && has_table_) integer::map_codes(table_.data(), yc + b * out_each, out_each, table_small_);
    });
  }

 private:
  static constexpr int64_t kMaxPool = 1 << 16, kMaxBlock = 1 << 8, kPoolCodesPlane = 256;
  static constexpr int64_t kQuantTask = 1 << 15;  // act_channel_scales: values quantized per pool task, at least
  std::optional<integer::QConv> conv_;
  int64_t ph_ = 1, pw_ = 1;  // the fused max pool's window (= strides); 1 x 1: none
  int64_t bs_ = 1;            // the fused DepthToSpace's block size; 1: none
  bool crd_ = false;          // its mode: CRD (true) or DCR
  bool residual_ = false;     // input R given: y = pool(conv) + R, then the Relu
  bool relu_ = false;
  std::optional<integer::ActQuant> out_q_;  // out_act_*: the output as this quantizer's int8 codes
  std::optional<integer::ActQuant> r_q_;    // residual_act_*: R given as this quantizer's int8 codes
  std::array<int8_t, 256> table_{};          // out_table (has_table_): the map of the output codes
  bool has_table_ = false;
  bool table_small_ = false;    // the output codes lie in [0, 15]: map_codes' 16-entry lookup
  bool channels_last_ = false;  // output [N, OH, OW, M]
  std::string check_;           // act_check: X's grid is a graph input's declared type (check_on_grid)
  // act_channel_scales: input channel c quantized with scale act_channel_scales[c] (the other act_* as given)
  std::vector<integer::ActQuant> channel_acts_;
};

// MaxPoolCodes: a MaxPool over int8 codes with non-overlapping windows (kernel_shape == strides, no pads, floor).
class MaxPoolCodesKernel : public OpKernel {
 public:
  explicit MaxPoolCodesKernel(const KernelInfo& info) {
    const std::vector<int64_t> k = info.attr_ints("kernel_shape", {});
    if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > kMax || k[1] > kMax)
      throw_error("attribute 'kernel_shape' must be 2 window sizes [pH, pW] in 1..", kMax, ", got ", shape_str(k));
    ph_ = k[0], pw_ = k[1];
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input X");
    if (x.shape.size() != 4) throw_error("input X must be 4-D [N, C, H, W], got shape ", shape_str(x.shape));
    if (x.shape[2] < ph_ || x.shape[3] < pw_)
      throw_error("input X is ", x.shape[2], " x ", x.shape[3], ", smaller than the window ", ph_, " x ", pw_);
    const Shape os = {x.shape[0], x.shape[1], x.shape[2] / ph_, x.shape[3] / pw_};
    int8_t* y = ctx.output_as<int8_t>(0, os);
    if (shape_size(os) == 0) return;
    integer::max_pool_windows(x.as<int8_t>(), checked_mul(x.shape[0], x.shape[1], "planes"), x.shape[2], x.shape[3],
                              ph_, pw_, y);
  }

 private:
  static constexpr int64_t kMax = 1 << 16;
  int64_t ph_ = 1, pw_ = 1;
};

// AvgPoolCodes: an AveragePool (no pads, floor) or GlobalAveragePool over the int8 codes of the act_* quantizer
// (a QConvCodes output), float32 out: the mean of the values the codes stand for (integer::avg_pool_codes).
class AvgPoolCodesKernel : public OpKernel {
 public:
  explicit AvgPoolCodesKernel(const KernelInfo& info) : q_(integer::nonneg_codes(integer_act_quant(info))) {
    if (q_.wide) throw_error("attribute 'act_bits': codes take a quantizer of at most 8 bits, got ", info.attr_int("act_bits", 8));
    global_ = info.attr_bool("global", false);
    if (global_) return;
    const std::vector<int64_t> k = info.attr_ints("kernel_shape", {});
    if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > kMax || k[1] > kMax || k[0] * k[1] > kMaxWindow)
      throw_error("attribute 'kernel_shape' must be 2 window sizes [kH, kW] in 1..", kMax, " with kH * kW <= ",
                  kMaxWindow, ", got ", shape_str(k));
    const std::vector<int64_t> st = info.attr_ints("strides", {1, 1});
    if (st.size() != 2 || st[0] < 1 || st[1] < 1 || st[0] > kMax || st[1] > kMax)
      throw_error("attribute 'strides' must be 2 strides in 1..", kMax, ", got ", shape_str(st));
    kh_ = k[0], kw_ = k[1], sh_ = st[0], sw_ = st[1];
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input X");
    if (x.shape.size() != 4) throw_error("input X must be 4-D [N, C, H, W], got shape ", shape_str(x.shape));
    const int64_t h = x.shape[2], w = x.shape[3];
    int64_t kh = kh_, kw = kw_, sh = sh_, sw = sw_;
    if (global_) {
      if (h < 1 || w < 1 || h * w > kMaxWindow)
        throw_error("input X is ", h, " x ", w, ": a global average takes 1 to ", kMaxWindow, " values per plane");
      kh = sh = h, kw = sw = w;
    }
    if (h < kh || w < kw) throw_error("input X is ", h, " x ", w, ", smaller than the window ", kh, " x ", kw);
    const Shape os = {x.shape[0], x.shape[1], (h - kh) / sh + 1, (w - kw) / sw + 1};
    float* y = ctx.output_as<float>(0, os);
    if (shape_size(os) == 0) return;
    integer::avg_pool_codes(x.as<int8_t>(), checked_mul(x.shape[0], x.shape[1], "planes"), h, w, kh, kw, sh, sw,
                            q_.offset, q_.scale, y);
  }

 private:
  static constexpr int64_t kMax = 1 << 16, kMaxWindow = 1 << 20;
  integer::ActQuant q_;
  bool global_ = false;
  int64_t kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1;
};

// QGemm, and QGemmCodes (codes_op: the output as the int8 codes of the out_act_* quantizer). X: float32 values or
// the int8 codes of the act_* quantizer (a QConvCodes / QGemmCodes output).
class QGemmKernel : public OpKernel {
 public:
  QGemmKernel(const KernelInfo& info, bool codes_op) {
    const integer::ActQuant act = integer_act_quant(info);
    check_ = info.attr_string("act_check", "");
    const OwnedTensor w = constant(info, 1, kI8, "W");
    if (w.shape.size() != 2) throw_error("input W must be 2-D [N, K], got shape ", shape_str(w.shape));
    const int64_t n = w.shape[0];
    gemm_.emplace(w.view().as<int8_t>(), n, w.shape[1], act, channel_values(info, 2, "S", n),
                  channel_values(info, 3, "B", n), info.attr_bool("relu", false), info.attr_bool("xnor", true),
                  weight_shift(info, n));
    if (codes_op != info.has_attr("out_act_scale"))
      throw_error(codes_op ? "QGemmCodes needs the attributes 'out_act_*' (at least out_act_scale): the quantizer "
                             "of its int8 output codes"
                           : "attribute 'out_act_scale' belongs to QGemmCodes (int8 output codes); QGemm's output "
                             "is float32");
    if (codes_op) {
      const integer::ActQuant q = integer::nonneg_codes(integer_act_quant(info, "out_act_"));
      if (q.wide)
        throw_error("attributes 'out_act_*': output codes take a quantizer of at most 8 bits, got ",
                    info.attr_int("out_act_bits", 8));
      gemm_->set_output_quant(q);
    }
    codes_out_ = codes_op;
    act_bits_ = info.attr_int("act_bits", 8);
    flatten_ = info.attr_int("flatten", -1);
    if (flatten_ < -1 || flatten_ > kMaxRank)
      throw_error("attribute 'flatten' must be an axis in 0..", kMaxRank, " (X is then read as ONNX's Flatten(X, "
                  "axis) gives it) or absent; got ", flatten_);
    x_rank_ = info.attr_int("x_rank", 0);
    if (x_rank_ < 0 || x_rank_ > kMaxRank)
      throw_error("attribute 'x_rank' must be a rank in 1..", kMaxRank, " or 0 (any rank); got ", x_rank_);
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    if (x.dtype != kFloat && x.dtype != kI8)
      throw_error("input X must be float32 values or int8 codes (of a QConvCodes / QGemmCodes), got ",
                  dtype_name(x.dtype));
    const bool codes_in = x.dtype == kI8;
    if (codes_in && gemm_->act().wide)
      throw_error("input X is int8 codes but the act_* quantizer has ", act_bits_,
                  " bits (9 to 24 bits have no int8 codes); feed float32 values");
    if (x.shape.empty()) throw_error("input X must have at least 1 dimension");
    // x_rank: the rank of X as the layer reads it (2 when flattened). Integer mode sets 2 where it folded a
    // BatchNormalization into a MatMul: that normalizes axis 1, the output channel of a 2-D X only.
    if (x_rank_ > 0 && (flatten_ >= 0 ? 2 : static_cast<int64_t>(x.shape.size())) != x_rank_)
      throw_error("input X of shape ", shape_str(x.shape), " must have rank ", x_rank_, " (attribute 'x_rank'",
                  x_rank_ == 2 ? ": the layer folds a BatchNormalization over axis 1, its output channel only for a "
                                 "2-D input)"
                               : ")");
    Shape ys = x.shape;
    if (flatten_ >= 0) {  // X read as Flatten(X, flatten_): [prod(dims before), prod(dims from the axis)]
      const auto axis = static_cast<size_t>(flatten_);
      if (axis > x.shape.size())
        throw_error("attribute 'flatten' is axis ", flatten_, " but input X has rank ", x.shape.size(), " (shape ",
                    shape_str(x.shape), ")");
      int64_t outer = 1, inner = 1;  // (no Shape copies per call)
      for (size_t d = 0; d < x.shape.size(); ++d) {
        int64_t& p = d < axis ? outer : inner;
        p = checked_mul(p, x.shape[d], d < axis ? "rows of the flattened input X" : "features of the flattened X");
      }
      if (inner != gemm_->k())
        throw_error("input X of shape ", shape_str(x.shape), " flattened at axis ", flatten_, " has ", inner,
                    " features but W [N, K] has K = ", gemm_->k());
      ys = {outer, gemm_->n()};
    } else {
      if (x.shape.back() != gemm_->k())
        throw_error("input X has ", x.shape.back(), " features (last dim) but W [N, K] has K = ", gemm_->k());
      ys.back() = gemm_->n();
    }
    float* y = codes_out_ ? nullptr : ctx.output_as<float>(0, ys);
    int8_t* yc = codes_out_ ? ctx.output_as<int8_t>(0, ys) : nullptr;
    const int64_t rows = shape_size(x.shape) / (gemm_->k() ? gemm_->k() : 1);
    if (shape_size(ys) == 0) return;
    if (!codes_in) check_on_grid(check_, gemm_->act(), x.as<float>(), shape_size(x.shape));
    const integer::QGemm::In in = codes_in ? integer::QGemm::In{nullptr, x.as<int8_t>()}
                                           : integer::QGemm::In{x.as<float>(), nullptr};
    gemm_->run(in, rows, {y, yc}, parallel(ctx));
  }

 private:
  std::optional<integer::QGemm> gemm_;
  std::string check_;  // act_check (check_on_grid)
  bool codes_out_ = false;
  int64_t act_bits_ = 8;  // act_bits, for the error above
  int64_t flatten_ = -1;  // flatten: X read as Flatten(X, axis); -1: X [..., K] as it is
  int64_t x_rank_ = 0;    // x_rank: X must have this rank as read (after flatten: 2); 0: any
  static constexpr int64_t kMaxRank = 64;
};

void infer_conv(const InferContext& ctx, ONNXTensorElementDataType out_type) {
  InferContext::Dims x, w;
  if (!ctx.input_shape(0, &x) || x.rank() != 4 || !ctx.input_shape(1, &w) || w.rank() != 4) return;
  // No output channel is an error of the kernel (at session creation); inferring 0 channels instead would let
  // onnxruntime's NCHWc rewrite of a following pool fail first, in a node of its own ("invalid channel count").
  if (w.dims[0] == 0) return;
  std::vector<int64_t> st = ctx.attr_ints("strides"), di = ctx.attr_ints("dilations"), pa = ctx.attr_ints("pads");
  if (st.size() != 2) st.assign(2, 1);
  if (di.size() != 2) di.assign(2, 1);
  if (pa.size() != 4) pa.assign(4, 0);
  InferContext::Dims y;
  y.dims = {x.dims[0], w.dims[0]};
  y.sym = {x.sym[0], w.sym[0]};
  for (size_t i = 0; i < 2; ++i) {
    int64_t d = -1;
    const int64_t k = w.dims[2 + i];
    if (x.dims[2 + i] >= 0 && k >= 1 && st[i] >= 1 && di[i] >= 1) {
      const int64_t span = di[i] * (k - 1) + 1, padded = x.dims[2 + i] + pa[i] + pa[i + 2];
      d = padded < span ? -1 : (padded - span) / st[i] + 1;
    }
    y.dims.push_back(d);
    y.sym.push_back(d < 0 ? InferContext::fresh_dim() : std::string());
  }
  // The fused max pool (attribute pool: [pH, pW], window == strides, floor).
  const std::vector<int64_t> pool = ctx.attr_ints("pool");
  for (size_t i = 0; i < 2 && pool.size() == 2; ++i) {
    if (y.dims[2 + i] >= 0 && pool[i] >= 1) {
      y.dims[2 + i] /= pool[i];
      y.sym[2 + i].clear();
    } else if (pool[i] != 1) {
      y.dims[2 + i] = -1;
      y.sym[2 + i] = InferContext::fresh_dim();
    }
  }
  // The fused DepthToSpace (attribute depth_to_space: the block size).
  const int64_t bs = ctx.attr_int("depth_to_space", 1);
  if (bs > 1) {
    y.dims[1] = y.dims[1] >= 0 && y.dims[1] % (bs * bs) == 0 ? y.dims[1] / (bs * bs) : -1;
    y.sym[1] = y.dims[1] < 0 ? InferContext::fresh_dim() : std::string();
    for (size_t i = 2; i < 4; ++i) {
      y.dims[i] = y.dims[i] >= 0 && y.dims[i] <= (int64_t{1} << 40) ? y.dims[i] * bs : -1;
      y.sym[i] = y.dims[i] < 0 ? InferContext::fresh_dim() : std::string();
    }
  }
  for (size_t i = 0; i < y.rank(); ++i)
    if (y.dims[i] < 0 && y.sym[i].empty()) y.sym[i] = InferContext::fresh_dim();
  if (ctx.attr_int("channels_last", 0) != 0) {  // [N, OH, OW, M]
    std::rotate(y.dims.begin() + 1, y.dims.begin() + 2, y.dims.end());
    std::rotate(y.sym.begin() + 1, y.sym.begin() + 2, y.sym.end());
  }
  ctx.set_output(0, out_type, y);
}

void infer_conv_values(const InferContext& ctx) { infer_conv(ctx, kFloat); }
void infer_conv_codes(const InferContext& ctx) { infer_conv(ctx, kI8); }

void infer_gemm(const InferContext& ctx, ONNXTensorElementDataType out_type) {
  InferContext::Dims x, w;
  if (!ctx.input_shape(0, &x) || x.rank() == 0) return;
  const bool have_w = ctx.input_shape(1, &w) && w.rank() == 2;
  const int64_t axis = ctx.attr_int("flatten", -1);
  if (axis >= 0) {  // [prod(dims before the axis), N]
    if (static_cast<size_t>(axis) > x.rank()) return;
    int64_t outer = 1;  // -1: unknown (a symbolic or overflowing product)
    for (int64_t i = 0; i < axis && outer >= 0; ++i)
      if (x.dims[i] < 0 || __builtin_mul_overflow(outer, x.dims[i], &outer)) outer = -1;
    InferContext::Dims y;
    y.dims = {axis == 1 ? x.dims[0] : outer, have_w ? w.dims[0] : -1};
    y.sym = {axis == 1 ? x.sym[0] : (outer < 0 ? InferContext::fresh_dim() : std::string()),
             have_w ? w.sym[0] : InferContext::fresh_dim()};
    ctx.set_output(0, out_type, y);
    return;
  }
  x.dims.back() = have_w ? w.dims[0] : -1;
  x.sym.back() = have_w ? w.sym[0] : InferContext::fresh_dim();
  ctx.set_output(0, out_type, x);
}

void infer_gemm_values(const InferContext& ctx) { infer_gemm(ctx, kFloat); }
void infer_gemm_codes(const InferContext& ctx) { infer_gemm(ctx, kI8); }

}  // namespace

OpSpec qconv_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kI8), req(kF64), req(kF64), opt(kAny)};  // X, R: float32 values or int8 codes
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QConvKernel>(info, false); };
  s.infer = &infer_conv_values;
  return s;
}

OpSpec qconv_codes_spec(const std::string& name) {
  OpSpec s = qconv_spec(name);
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QConvKernel>(info, true); };
  s.infer = &infer_conv_codes;
  return s;
}

static void infer_maxpool_codes(const InferContext& ctx) {
  InferContext::Dims x;
  if (!ctx.input_shape(0, &x) || x.rank() != 4) return;
  const std::vector<int64_t> k = ctx.attr_ints("kernel_shape");
  for (size_t i = 0; i < 2; ++i) {
    const bool known = k.size() == 2 && k[i] >= 1 && x.dims[2 + i] >= 0;
    x.dims[2 + i] = known ? x.dims[2 + i] / k[i] : -1;
    x.sym[2 + i] = known ? std::string() : InferContext::fresh_dim();
  }
  ctx.set_output(0, kI8, x);
}

OpSpec maxpool_codes_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<MaxPoolCodesKernel>(info); };
  s.infer = &infer_maxpool_codes;
  return s;
}

static void infer_avgpool_codes(const InferContext& ctx) {
  InferContext::Dims x;
  if (!ctx.input_shape(0, &x) || x.rank() != 4) return;
  const bool global = ctx.attr_int("global", 0) != 0;
  const std::vector<int64_t> k = ctx.attr_ints("kernel_shape");
  std::vector<int64_t> st = ctx.attr_ints("strides");
  if (st.size() != 2) st.assign(2, 1);
  for (size_t i = 0; i < 2; ++i) {
    const bool known = global || (k.size() == 2 && k[i] >= 1 && st[i] >= 1 && x.dims[2 + i] >= k[i]);
    x.dims[2 + i] = global ? 1 : known ? (x.dims[2 + i] - k[i]) / st[i] + 1 : -1;
    x.sym[2 + i] = known ? std::string() : InferContext::fresh_dim();
  }
  ctx.set_output(0, kFloat, x);
}

OpSpec avgpool_codes_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<AvgPoolCodesKernel>(info); };
  s.infer = &infer_avgpool_codes;
  return s;
}

OpSpec qgemm_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kI8), req(kF64), req(kF64)};  // X: float32 values or int8 codes
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QGemmKernel>(info, false); };
  s.infer = &infer_gemm_values;
  return s;
}

OpSpec qgemm_codes_spec(const std::string& name) {
  OpSpec s = qgemm_spec(name);
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QGemmKernel>(info, true); };
  s.infer = &infer_gemm_codes;
  return s;
}

}  // namespace ortquant::ort
