// QONNX FloatQuant adapter: attributes at creation (saturation=0 needs has_inf or has_nan, decision 7);
// constant parameter inputs are expanded once at creation; a node on constant inputs is computed once.
// dtypes (output float32 in every case):
// - all float32; X float16 with the rest float32 (numpy promotes to float32 at X / scale); all six float16 (the
//   float16 pipeline of core/qonnx/float_quant.h);
// - X float32 or float64 with each parameter float32, float64, int32 or int64, at least one input float64, int32
//   or int64: the float64 path of core/qonnx/wide_params.h (each step in numpy's dtype; docs/ops.md, "float64 and
//   int64 parameters"). float16 does not mix with those.
// Five OpSpecs: the three float32/float16 forms, then X float32 / float64 with any parameter types (the kernel
// checks them: at creation from the declared types, and again per run).
#include "core/qonnx/float_quant.h"
#include "core/qonnx/wide_params.h"

#include "ort/kernels/qonnx/elementwise.h"
#include "ort/kernels/qonnx/qonnx_ops.h"

namespace ortquant::ort {
namespace {

using namespace qonnx_elementwise;

constexpr const char* kParamNames[5] = {"scale", "exponent_bitwidth", "mantissa_bitwidth", "exponent_bias",
                                        "max_val"};

bool is_wide(ONNXTensorElementDataType t) {
  return t == kDouble || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
}

// The float32 / float16 forms (no float64 or integer input): X float32 with five float32 parameters, X float16
// with five float32 or five float16 parameters. Throws naming the first input that breaks them.
void check_narrow(ONNXTensorElementDataType x, const ONNXTensorElementDataType (&p)[5]) {
  if (x != kFloat && x != kFloat16) throw_error("input X must be float32, float16 or float64, got ", dtype_name(x));
  if (x == kFloat && p[0] == kFloat16)
    throw_error("input scale must be float32 when X is float32 (float16 parameters need a float16 X), got float16");
  const ONNXTensorElementDataType want = p[0] == kFloat16 ? kFloat16 : kFloat;
  for (int i = 0; i < 5; ++i) {
    if (p[i] != want)
      throw_error("input ", kParamNames[i], " must be ", dtype_name(want), " like scale (or any input float64, int32 ",
                  "or int64 with X float32 or float64), got ", dtype_name(p[i]));
  }
}

// The float64 path's kind of an input: X float32 or float64, a parameter also int32 or int64 (float16 does not
// mix with those). Throws naming the input otherwise.
qonnx::WideTensor::Kind wide_kind(ONNXTensorElementDataType t, bool allow_int, const char* what) {
  using K = qonnx::WideTensor;
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return K::kF32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return K::kF64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      if (allow_int) return K::kI32;
      break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
      if (allow_int) return K::kI64;
      break;
    default: break;
  }
  throw_error("input ", what, allow_int ? " must be float32, float64, int32 or int64" : " must be float32 or float64",
              " when an input is float64, int32 or int64, got ", dtype_name(t));
}

qonnx::WideTensor wide(const TensorView& t, bool allow_int, const char* what) {
  return {t.data, wide_kind(t.dtype, allow_int, what), t.shape};
}

class FloatQuantKernel : public OpKernel {
 public:
  explicit FloatQuantKernel(const KernelInfo& info)
      : x_(info, 0), scale_(info, 1), e_bits_(info, 2), m_bits_(info, 3), bias_(info, 4), max_val_(info, 5) {
    const std::string mode = info.attr_string("rounding_mode", "ROUND");
    if (!parse_qonnx_round_mode(mode, &mode_)) throw_error("attribute 'rounding_mode': unknown rounding mode '", mode, "'");
    const bool has_inf = info.attr_bool("has_inf", false);
    const bool has_nan = info.attr_bool("has_nan", false);
    (void)info.attr_bool("has_subnormal", false);  // validated; qonnx ignores it (the subnormal grid is always used)
    const bool saturation = info.attr_bool("saturation", true);
    overflow_ = qonnx::float_quant_overflow(saturation, has_inf, has_nan);
    // The declared dtypes: a combination no form accepts fails here, at session creation.
    ONNXTensorElementDataType declared[6];
    bool known = true, any_wide = false;
    for (size_t i = 0; i < 6; ++i) {
      declared[i] = info.input_dtype(i);
      known = known && declared[i] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      any_wide = any_wide || is_wide(declared[i]);
    }
    if (known && !any_wide)
      check_narrow(declared[0], {declared[1], declared[2], declared[3], declared[4], declared[5]});
    if (known && any_wide) {
      (void)wide_kind(declared[0], false, "X");
      for (size_t i = 1; i < 6; ++i) (void)wide_kind(declared[i], true, kParamNames[i - 1]);
    }
    if (!(scale_.is_constant() && e_bits_.is_constant() && m_bits_.is_constant() && bias_.is_constant() &&
          max_val_.is_constant()))
      return;
    const TensorView s = *scale_.constant(), e = *e_bits_.constant(), m = *m_bits_.constant(),
                     b = *bias_.constant(), mv = *max_val_.constant();
    const_wide_ = is_wide(s.dtype) || is_wide(e.dtype) || is_wide(m.dtype) || is_wide(b.dtype) || is_wide(mv.dtype);
    if (const_wide_) {
      format_ = make_format(e, m, b);
      (void)wide(s, true, "scale");
      (void)wide(mv, true, "max_val");
    } else {
      params_ = make_params(s, e, m, b, mv);
    }
    if (x_.is_constant()) {
      folded_ = OwnedTensor();
      const TensorView x = *x_.constant();
      if (const_wide_ || is_wide(x.dtype)) run_wide(x, s, e, m, b, mv, nullptr, &*folded_);
      else run(x, *params_, nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    const TensorView x = x_.get(ctx);
    if (params_ && !is_wide(x.dtype)) return run(x, *params_, &ctx, nullptr);
    const TensorView s = scale_.get(ctx), e = e_bits_.get(ctx), m = m_bits_.get(ctx), b = bias_.get(ctx),
                     mv = max_val_.get(ctx);
    if (params_ || const_wide_ || is_wide(x.dtype) || is_wide(s.dtype) || is_wide(e.dtype) || is_wide(m.dtype) ||
        is_wide(b.dtype) || is_wide(mv.dtype))
      return run_wide(x, s, e, m, b, mv, &ctx, nullptr);
    run(x, make_params(s, e, m, b, mv), &ctx, nullptr);
  }

 private:
  static qonnx::FloatQuantParams make_params(const TensorView& s, const TensorView& e, const TensorView& m,
                                             const TensorView& b, const TensorView& mv) {
    check_narrow(kFloat16, {s.dtype, e.dtype, m.dtype, b.dtype, mv.dtype});  // X is checked by run()
    return qonnx::float_quant_params(num_tensor(s, false, "scale", true),
                                     num_tensor(e, false, "exponent_bitwidth", true),
                                     num_tensor(m, false, "mantissa_bitwidth", true),
                                     num_tensor(b, false, "exponent_bias", true), num_tensor(mv, false, "max_val", true));
  }

  static qonnx::FloatQuantWideFormat make_format(const TensorView& e, const TensorView& m, const TensorView& b) {
    return qonnx::float_quant_wide_format(wide(e, true, "exponent_bitwidth"), wide(m, true, "mantissa_bitwidth"),
                                          wide(b, true, "exponent_bias"));
  }

  void run(const TensorView& x, const qonnx::FloatQuantParams& p, KernelContext* ctx, OwnedTensor* folded) const {
    const bool x16 = is_float16(x, "input X");
    const Shape out = broadcast_shapes({x.shape, p.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, p.shape});
    float* y = output_buffer(ctx, folded, out);
    run_range(ctx, plan.total,
              [&](int64_t b, int64_t e) { qonnx::float_quant(plan, x.data, x16, p, y, b, e, mode_, overflow_); });
  }

  // The float64 path (any input float64, int32 or int64).
  void run_wide(const TensorView& x, const TensorView& s, const TensorView& e, const TensorView& m,
                const TensorView& b, const TensorView& mv, KernelContext* ctx, OwnedTensor* folded) const {
    const qonnx::WideTensor xw = wide(x, false, "X"), sw = wide(s, true, "scale"), mw = wide(mv, true, "max_val");
    const qonnx::FloatQuantWideFormat f = format_ ? *format_ : make_format(e, m, b);
    const Shape out = broadcast_shapes({x.shape, s.shape, e.shape, m.shape, b.shape, mv.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape, mv.shape});
    float* y = output_buffer(ctx, folded, out);
    run_range(ctx, plan.total, [&](int64_t b0, int64_t e0) {
      qonnx::float_quant_wide(plan, xw, sw, mw, f, y, b0, e0, mode_, overflow_);
    });
  }

  ParamInput x_, scale_, e_bits_, m_bits_, bias_, max_val_;
  RoundMode mode_ = RoundMode::kHalfEven;
  qonnx::FloatOverflow overflow_ = qonnx::FloatOverflow::kSaturate;
  bool const_wide_ = false;  // parameters constant, one of them float64 / int32 / int64
  std::optional<qonnx::FloatQuantParams> params_;       // parameters constant, float32 or float16
  std::optional<qonnx::FloatQuantWideFormat> format_;  // set with const_wide_
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> float_quant_specs(const std::string& name) {
  std::vector<OpSpec> specs;
  auto add = [&](ONNXTensorElementDataType x, ONNXTensorElementDataType params) {
    OpSpec s;
    s.name = name;
    s.inputs = {req(x), req(params), req(params), req(params), req(params), req(params)};
    s.outputs = {req(kFloat)};
    s.factory = [](const KernelInfo& info) { return std::make_unique<FloatQuantKernel>(info); };
    specs.push_back(std::move(s));
  };
  add(kFloat, kFloat);
  add(kFloat16, kFloat);
  add(kFloat16, kFloat16);
  // float64 / int32 / int64 parameters (and float64 X): any parameter type, checked by the kernel
  add(kFloat, kAny);
  add(kDouble, kAny);
  return specs;
}

}  // namespace ortquant::ort
