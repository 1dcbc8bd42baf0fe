// QONNX FloatQuant adapter: attributes at creation (saturation=0 needs has_inf or has_nan, decision 7);
// constant parameter inputs are expanded once at creation; a node on constant inputs is computed once.
// dtypes (three OpSpecs, output float32): all float32; X float16 with the rest float32 (numpy promotes to float32
// at X / scale); all six float16 (the float16 pipeline of core/qonnx/float_quant.h).
#include "core/qonnx/float_quant.h"

#include "ort/kernels/qonnx/elementwise.h"
#include "ort/kernels/qonnx/qonnx_ops.h"

namespace ortquant::ort {
namespace {

using namespace qonnx_elementwise;

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
    if (scale_.is_constant() && e_bits_.is_constant() && m_bits_.is_constant() && bias_.is_constant() &&
        max_val_.is_constant()) {
      params_ = make_params(*scale_.constant(), *e_bits_.constant(), *m_bits_.constant(), *bias_.constant(),
                            *max_val_.constant());
      if (x_.is_constant()) {
        folded_ = OwnedTensor();
        run(*x_.constant(), *params_, nullptr, &*folded_);
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    const TensorView x = x_.get(ctx);
    if (params_) return run(x, *params_, &ctx, nullptr);
    const qonnx::FloatQuantParams p =
        make_params(scale_.get(ctx), e_bits_.get(ctx), m_bits_.get(ctx), bias_.get(ctx), max_val_.get(ctx));
    run(x, p, &ctx, nullptr);
  }

 private:
  static qonnx::FloatQuantParams make_params(const TensorView& s, const TensorView& e, const TensorView& m,
                                             const TensorView& b, const TensorView& mv) {
    return qonnx::float_quant_params(num_tensor(s, false, "scale", true),
                                     num_tensor(e, false, "exponent_bitwidth", true),
                                     num_tensor(m, false, "mantissa_bitwidth", true),
                                     num_tensor(b, false, "exponent_bias", true), num_tensor(mv, false, "max_val", true));
  }

  void run(const TensorView& x, const qonnx::FloatQuantParams& p, KernelContext* ctx, OwnedTensor* folded) const {
    const bool x16 = is_float16(x, "input X");
    const Shape out = broadcast_shapes({x.shape, p.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, p.shape});
    float* y = output_buffer(ctx, folded, out);
    run_range(ctx, plan.total,
              [&](int64_t b, int64_t e) { qonnx::float_quant(plan, x.data, x16, p, y, b, e, mode_, overflow_); });
  }

  ParamInput x_, scale_, e_bits_, m_bits_, bias_, max_val_;
  RoundMode mode_ = RoundMode::kHalfEven;
  qonnx::FloatOverflow overflow_ = qonnx::FloatOverflow::kSaturate;
  std::optional<qonnx::FloatQuantParams> params_;
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
  return specs;
}

}  // namespace ortquant::ort
