// LSTMInt / GRUInt adapter (linger.md section 4, decisions 12, 13, 15, 16).
#include "ort/kernels/linger/rnn_kernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/linger/gru.h"
#include "core/linger/lstm.h"

namespace ortquant::ort {
namespace {

constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
constexpr ONNXTensorElementDataType kI32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
constexpr ONNXTensorElementDataType kI64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;

const char* kLstmForms =
    "[x int8, (lengths int64), (h0 float32, c0 float32), W_ih int8, W_hh int8, (B_ih int32, B_hh int32)]";
const char* kGruForms = "[x int8, (lengths int64), (h0 float32), W_ih int8, W_hh int8, (B_ih int32, B_hh int32)]";

bool is_lengths_dtype(ONNXTensorElementDataType t) { return t == kI64 || t == kI32; }

double scale_attr(const KernelInfo& info, const char* name) {
  const float s = info.attr_float(name);
  if (!(s > 0.f) || !std::isfinite(s)) throw_error("attribute '", name, "' must be a finite positive scale, got ", s);
  return s;
}

int bits_attr(const KernelInfo& info, const char* name, int64_t dflt) {
  const int64_t b = info.attr_int(name, dflt);
  if (b < 2 || b > 8) throw_error("attribute '", name, "' must be between 2 and 8 (int8 tensors), got ", b);
  return static_cast<int>(b);
}

std::string shape_of(const TensorView& t) { return shape_str(t.shape); }

void expect_shape(const TensorView& t, const Shape& want, const char* what) {
  if (t.shape != want) throw_error("input ", what, " must have shape ", shape_str(want), ", got ", shape_of(t));
}

}  // namespace

LingerRnnKernel::LingerRnnKernel(const KernelInfo& info, bool lstm)
    : lstm_(lstm), gates_(lstm ? 4 : 3), op_(lstm ? "LSTMInt" : "GRUInt") {
  // Attributes.
  linger::RnnAttrs a;
  a.hidden_size = info.attr_int("hidden_size");
  check_range("hidden_size", a.hidden_size, 1, kMaxGeometry);  // gates * hidden_size etc. stay far from overflow
  if (info.has_attr("input_size")) {
    a.input_size = info.attr_int("input_size");
    check_range("input_size", a.input_size, 1, kMaxGeometry);
    input_size_given_ = true;
  }
  const int64_t layers = info.attr_int("num_layers", 1);
  if (layers != 1) throw_error("attribute 'num_layers' must be 1 (linger exports one layer per node), got ", layers);
  a.batch_first = info.attr_bool("batch_first", false);
  // The seed spells it go_gorward; accept that spelling too when go_forward is absent.
  const bool fwd_given = info.has_attr("go_forward");
  a.go_forward = fwd_given ? info.attr_bool("go_forward", true) : info.attr_bool("go_gorward", true);
  a.scale_i = scale_attr(info, "scale_i");
  a.scale_h = scale_attr(info, "scale_h");
  a.scale_iw = scale_attr(info, "scale_iw");
  a.scale_hw = scale_attr(info, "scale_hw");
  a.data_bits = bits_attr(info, "data_bits", 8);
  bits_attr(info, "parameter_bits", 8);
  if (info.has_attr("o_bits")) {
    a.quantized_output = true;
    a.o_bits = bits_attr(info, "o_bits", 8);
    if (!info.has_attr("scale_o")) throw_error("attribute 'scale_o' is required when 'o_bits' is given");
    a.scale_o = scale_attr(info, "scale_o");
  }
  const std::string platform = info.attr_string("platform_quant", "luna_quant");
  if (platform != "luna_quant")
    throw_error("attribute 'platform_quant' must be 'luna_quant' (the only platform linger 1.1.1 implements), got '",
                platform, "'");
  // Decision 13: the seed's table attributes are validated and otherwise ignored (the luna tables always apply).
  if (info.has_attr("table_len") && info.attr_int("table_len") < 1)
    throw_error("attribute 'table_len' must be positive, got ", info.attr_int("table_len"));
  for (const char* b : {"sigmoid_bound", "tanh_bound"}) {
    if (!info.has_attr(b)) continue;
    const float v = info.attr_float(b);
    if (!(v > 0.f) || !std::isfinite(v)) throw_error("attribute '", b, "' must be finite and positive, got ", v);
  }
  // scale_io / scale_ho: written by no linger release we know and unused by linger's evaluation; type-checked only.
  for (const char* s : {"scale_io", "scale_ho", "dropout"})
    if (info.has_attr(s)) (void)info.attr_float(s);
  plan_ = lstm ? linger::make_lstm_plan(a) : linger::make_gru_plan(a);

  // The output onnxruntime resolved must be what o_bits says (ortquant's type inference sets it).
  const ONNXTensorElementDataType want = a.quantized_output ? kI8 : kFloat;
  const ONNXTensorElementDataType got = info.output_dtype(0);
  if (got != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && got != want)
    throw_error("output 0 is ", dtype_name(got), " in the graph but ", a.quantized_output ? "o_bits" : "no o_bits",
                " means ", dtype_name(want));

  // The input form, from the count and the declared dtypes (decision 16).
  const char* forms = lstm ? kLstmForms : kGruForms;
  const int n = static_cast<int>(info.input_count());
  for (int i = 0; i < n; ++i)
    if (!info.has_input(static_cast<size_t>(i)))
      throw_error("input ", i, " is empty; ", op_, " takes ", forms);
  auto dt = [&](int i) { return i < n ? info.input_dtype(static_cast<size_t>(i)) : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED; };
  int i = 1;
  if (is_lengths_dtype(dt(i))) form_.lengths = i++;
  if (dt(i) == kFloat) {
    form_.h0 = i++;
    if (lstm) {
      if (dt(i) != kFloat) throw_error("input h0 (", i - 1, ") is not followed by c0 float32; ", op_, " takes ", forms);
      form_.c0 = i++;
    }
  }
  if (n - i != 2 && n - i != 4)
    throw_error(n, " inputs do not match any form of ", op_, " (after x, lengths and initial state, 2 weights and 0 or 2 "
                "biases): ", forms);
  form_.w_ih = i++;
  form_.w_hh = i++;
  if (i < n) {
    form_.b_ih = i++;
    form_.b_hh = i++;
  }
  const struct {
    int pos;
    ONNXTensorElementDataType want;
    const char* name;
  } roles[] = {{form_.w_ih, kI8, "W_ih"}, {form_.w_hh, kI8, "W_hh"}, {form_.b_ih, kI32, "B_ih"},
               {form_.b_hh, kI32, "B_hh"}};
  if (dt(0) != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && dt(0) != kI8)
    throw_error("input x must be int8, got ", dtype_name(dt(0)));
  for (const auto& r : roles) {
    if (r.pos < 0) continue;
    if (dt(r.pos) != r.want && dt(r.pos) != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
      throw_error("input ", r.pos, " (", r.name, ") must be ", dtype_name(r.want), ", got ", dtype_name(dt(r.pos)),
                  "; ", op_, " takes ", forms);
  }

  auto capture = [&](int pos) { return pos < 0 ? ParamInput() : ParamInput(info, static_cast<size_t>(pos)); };
  lengths_ = capture(form_.lengths);
  h0_ = capture(form_.h0);
  c0_ = capture(form_.c0);
  w_ih_ = capture(form_.w_ih);
  w_hh_ = capture(form_.w_hh);
  b_ih_ = capture(form_.b_ih);
  b_hh_ = capture(form_.b_hh);
  // Decision 4: constant weights are validated and packed once.
  const bool biases_const = form_.b_ih < 0 || (b_ih_.is_constant() && b_hh_.is_constant());
  if (w_ih_.is_constant() && w_hh_.is_constant() && biases_const) {
    packed_ = weights_from(*w_ih_.constant(), *w_hh_.constant(), b_ih_.constant(), b_hh_.constant());
    plan_.attrs.input_size = packed_->w_ih.k();
  }
}

linger::RnnWeights LingerRnnKernel::weights_from(const TensorView& w_ih, const TensorView& w_hh,
                                                 const std::optional<TensorView>& b_ih,
                                                 const std::optional<TensorView>& b_hh) const {
  const int64_t h = plan_.attrs.hidden_size, g = gates_ * h;
  expect_dtype(w_ih, kI8, "W_ih");
  expect_dtype(w_hh, kI8, "W_hh");
  if (w_ih.shape.size() != 2 || w_ih.shape[0] != g)
    throw_error("input W_ih must have shape [", g, ", input_size] (", gates_, " x hidden_size ", h, "), got ",
                shape_of(w_ih));
  if (input_size_given_ && w_ih.shape[1] != plan_.attrs.input_size)
    throw_error("input W_ih must have shape [", g, ", ", plan_.attrs.input_size, "] (attribute input_size), got ",
                shape_of(w_ih));
  expect_shape(w_hh, {g, h}, "W_hh");
  if (b_ih) {
    expect_dtype(*b_ih, kI32, "B_ih");
    expect_dtype(*b_hh, kI32, "B_hh");
    expect_shape(*b_ih, {g}, "B_ih");
    expect_shape(*b_hh, {g}, "B_hh");
  }
  linger::RnnPlan p = plan_;
  p.attrs.input_size = w_ih.shape[1];
  return linger::make_rnn_weights(p, w_ih.as<int8_t>(), w_hh.as<int8_t>(), b_ih ? b_ih->as<int32_t>() : nullptr,
                                  b_hh ? b_hh->as<int32_t>() : nullptr);
}

void LingerRnnKernel::compute(KernelContext& ctx) const {
  const TensorView x = ctx.required_input(0);
  expect_dtype(x, kI8, "input x");
  if (x.shape.size() != 3)
    throw_error("input x must be 3-D ", plan_.attrs.batch_first ? "[B, T, D]" : "[T, B, D]", ", got ", shape_of(x));
  const bool bf = plan_.attrs.batch_first;
  const int64_t t_len = bf ? x.shape[1] : x.shape[0], batch = bf ? x.shape[0] : x.shape[1], d = x.shape[2];
  const int64_t h = plan_.attrs.hidden_size;
  if (t_len < 1) throw_error("input x has no time steps (shape ", shape_of(x), ")");

  std::optional<linger::RnnWeights> local;
  if (!packed_) {
    local = weights_from(w_ih_.get(ctx), w_hh_.get(ctx), b_ih_.present() ? std::optional(b_ih_.get(ctx)) : std::nullopt,
                         b_hh_.present() ? std::optional(b_hh_.get(ctx)) : std::nullopt);
  }
  const linger::RnnWeights& w = packed_ ? *packed_ : *local;
  if (d != w.w_ih.k())
    throw_error("input x has ", d, " features per step but W_ih has ", w.w_ih.k(), " columns (input_size)");
  linger::RnnPlan plan = plan_;
  plan.attrs.input_size = d;

  // Per-sample lengths (linger packs the batch: sample b runs its first lengths[b] steps).
  std::vector<int32_t> lens;
  int64_t t_out = t_len;
  if (lengths_.present()) {
    const TensorView l = lengths_.get(ctx);
    if (!is_lengths_dtype(l.dtype)) throw_error("input lengths must be int64, got ", dtype_name(l.dtype));
    if (l.size() != batch)
      throw_error("input lengths must have one entry per sample (", batch, "), got shape ", shape_of(l));
    t_out = 0;
    lens.resize(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t v = l.dtype == kI64 ? l.as<int64_t>()[b] : l.as<int32_t>()[b];
      if (v < 1 || v > t_len) throw_error("input lengths[", b, "] = ", v, " is outside [1, ", t_len, "] (T of x)");
      lens[static_cast<size_t>(b)] = static_cast<int32_t>(v);
      t_out = std::max(t_out, v);
    }
  }
  const Shape state_shape = {1, batch, h};
  std::optional<TensorView> h0, c0;
  if (h0_.present()) {
    h0 = h0_.get(ctx);
    expect_dtype(*h0, kFloat, "input h0");
    expect_shape(*h0, state_shape, "h0");
  }
  if (c0_.present()) {
    c0 = c0_.get(ctx);
    expect_dtype(*c0, kFloat, "input c0");
    expect_shape(*c0, state_shape, "c0");
  }

  linger::RnnIo io;
  io.x = x.as<int8_t>();
  io.seq_len = t_len;
  io.batch = batch;
  io.lengths = lens.empty() ? nullptr : lens.data();
  io.h0 = h0 ? h0->as<float>() : nullptr;
  io.c0 = c0 ? c0->as<float>() : nullptr;
  io.t_out = t_out;
  io.y = ctx.output(0, bf ? Shape{batch, t_out, h} : Shape{t_out, batch, h});
  io.hidden = ctx.output_as<float>(1, state_shape);
  io.cell = lstm_ ? ctx.output_as<float>(2, state_shape) : nullptr;
  const linger::RnnParallel par = [&ctx](size_t n, const linger::RnnTaskFn& fn) { ctx.parallel_for(n, fn); };
  if (lstm_) linger::lstm_int(plan, w, io, par);
  else linger::gru_int(plan, w, io, par);
}

namespace {

void infer_rnn(const InferContext& c, int outputs) {
  const ONNXTensorElementDataType y = c.has_attr("o_bits") ? kI8 : kFloat;
  const bool bf = c.attr_int("batch_first", 0) != 0;
  const int64_t h = c.attr_int("hidden_size", -1);
  InferContext::Dims x;
  const bool known = c.input_shape(0, &x) && x.rank() == 3;
  auto dim = [&](size_t i, InferContext::Dims* out) {
    if (known) {
      out->dims.push_back(x.dims[i]);
      out->sym.push_back(x.sym[i]);
    } else {
      out->dims.push_back(-1);
      out->sym.push_back(InferContext::fresh_dim());
    }
  };
  auto fixed = [](int64_t v, InferContext::Dims* out) {
    out->dims.push_back(v >= 1 ? v : -1);
    out->sym.push_back(v >= 1 ? std::string() : InferContext::fresh_dim());
  };
  // With lengths the time axis is max(lengths), unknown here.
  const ONNXTensorElementDataType d1 = c.input_dtype(1);
  const bool has_lengths = d1 == kI64 || d1 == kI32;
  auto time = [&](InferContext::Dims* out) {
    if (has_lengths) {
      out->dims.push_back(-1);
      out->sym.push_back(InferContext::fresh_dim());
    } else {
      dim(bf ? 1 : 0, out);
    }
  };
  InferContext::Dims out, state;
  if (bf) {
    dim(0, &out);
    time(&out);
  } else {
    time(&out);
    dim(1, &out);
  }
  fixed(h, &out);
  fixed(1, &state);
  dim(bf ? 0 : 1, &state);
  fixed(h, &state);
  c.set_output(0, y, out);
  for (int i = 1; i < outputs; ++i) c.set_output(static_cast<size_t>(i), kFloat, state);
}

}  // namespace

OpSpec linger_rnn_spec(const std::string& name, bool lstm, ONNXTensorElementDataType out0) {
  OpSpec s;
  s.name = name;
  // Longest form: LSTM [x, lengths, h0, c0, W_ih, W_hh, B_ih, B_hh], GRU [x, lengths, h0, W_ih, W_hh, B_ih, B_hh].
  // Positions that hold different dtypes in different forms are UNDEFINED (decision 16); the kernel checks.
  if (lstm) {
    s.inputs = {req(kI8), req(kAny), req(kAny), opt(kAny), opt(kAny), opt(kAny), opt(kI32), opt(kI32)};
    s.outputs = {req(out0), req(kFloat), req(kFloat)};
  } else {
    s.inputs = {req(kI8), req(kAny), req(kAny), opt(kAny), opt(kAny), opt(kI32), opt(kI32)};
    s.outputs = {req(out0), req(kFloat)};
  }
  s.factory = [lstm](const KernelInfo& info) { return std::make_unique<LingerRnnKernel>(info, lstm); };
  s.infer = lstm ? &LingerRnnKernel::infer_lstm : &LingerRnnKernel::infer_gru;
  return s;
}

void LingerRnnKernel::infer_lstm(const InferContext& c) { infer_rnn(c, 3); }
void LingerRnnKernel::infer_gru(const InferContext& c) { infer_rnn(c, 2); }


}  // namespace ortquant::ort
