// QONNX Quant / IntQuant adapter: attributes and constant inputs at creation, core::qonnx::int_quant per run.
#include "core/qonnx/quant.h"

#include <cstring>

#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

class QuantKernel : public OpKernel {
 public:
  explicit QuantKernel(const KernelInfo& info)
      : x_(info, 0), scale_(info, 1), zeropt_(info, 2), bitwidth_(info, 3) {
    signed_ = info.attr_bool("signed", true);
    narrow_ = info.attr_bool("narrow", false);
    const std::string mode = info.attr_string("rounding_mode", "ROUND");
    if (!parse_qonnx_round_mode(mode, &mode_)) throw_error("attribute 'rounding_mode': unknown rounding mode '", mode, "'");
    // Inputs all constant (a weight quantizer): compute once here, bit-exact with computing per run.
    if (x_.is_constant() && scale_.is_constant() && zeropt_.is_constant() && bitwidth_.is_constant()) {
      folded_ = OwnedTensor();
      run(*x_.constant(), *scale_.constant(), *zeropt_.constant(), *bitwidth_.constant(), nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) {
      void* y = ctx.output(0, folded_->shape);
      if (!folded_->bytes.empty()) std::memcpy(y, folded_->bytes.data(), folded_->bytes.size());
      return;
    }
    run(x_.get(ctx), scale_.get(ctx), zeropt_.get(ctx), bitwidth_.get(ctx), &ctx, nullptr);
  }

 private:
  // Computes into ctx's output 0, or into `folded` when ctx is null.
  void run(const TensorView& x, const TensorView& s, const TensorView& z, const TensorView& b, KernelContext* ctx,
           OwnedTensor* folded) const {
    expect_dtype(x, kFloat, "input X");
    expect_dtype(s, kFloat, "input scale");
    expect_dtype(z, kFloat, "input zeropt");
    if (b.size() != 1) throw_error("input bitwidth must have exactly one element, got shape ", shape_str(b.shape));
    qonnx::IntQuantBounds bounds;
    if (b.dtype == kFloat) {
      bounds = qonnx::int_quant_bounds(signed_, narrow_, *b.as<float>());
    } else if (b.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
      bounds = qonnx::int_quant_bounds_int(signed_, narrow_, *b.as<int32_t>());
    } else {
      throw_error("input bitwidth must be float32 or int32, got ", dtype_name(b.dtype));
    }
    const Shape out = broadcast_shapes({x.shape, s.shape, z.shape, b.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape, z.shape});
    float* y;
    if (ctx) {
      y = ctx->output_as<float>(0, out);
    } else {
      folded->dtype = kFloat;
      folded->shape = out;
      folded->bytes.resize(static_cast<size_t>(plan.total) * sizeof(float));
      y = reinterpret_cast<float*>(folded->bytes.data());
    }
    auto body = [&](int64_t b0, int64_t e0) {
      qonnx::int_quant(plan, x.as<float>(), s.as<float>(), z.as<float>(), y, b0, e0, bounds, mode_);
    };
    if (ctx) ctx->parallel_range(plan.total, kElementwiseGrain, body);
    else body(0, plan.total);
  }

  ParamInput x_, scale_, zeropt_, bitwidth_;
  bool signed_ = true, narrow_ = false;
  RoundMode mode_ = RoundMode::kHalfEven;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec quant_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat), req(kFloat), req(kFloat), req(kAny)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QuantKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
