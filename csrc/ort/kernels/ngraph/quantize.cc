// nGraph Quantize adapter: attributes and constant inputs at creation, core ngraph::quantize per run.
#include "core/ngraph/quantize.h"

#include <cstring>

#include "ort/kernels/ngraph/ngraph_common.h"
#include "ort/kernels/ngraph/ngraph_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using ngraph::QuantType;
using ngraph::RealType;
using ngraph_detail::onnx_type;

constexpr const char* kModeNames =
    "ROUND_NEAREST_TOWARD_INFINITY, ROUND_NEAREST_TOWARD_ZERO, ROUND_NEAREST_UPWARD, ROUND_NEAREST_DOWNWARD, "
    "ROUND_NEAREST_TOWARD_EVEN, ROUND_TOWARD_INFINITY, ROUND_TOWARD_ZERO, ROUND_UP, ROUND_DOWN";

class QuantizeKernel : public OpKernel {
 public:
  QuantizeKernel(const KernelInfo& info, RealType rt, QuantType qt)
      : rt_(rt), qt_(qt), x_(info, 0), scale_(info, 1), zero_point_(info, 2) {
    axes_ = info.attr_ints("axes", {});
    ngraph::check_axes(axes_);
    // Required, as in nGraph (its constructor has no default) and in ortquant's schema.
    const std::string mode = info.attr_string("round_mode");
    if (!parse_ngraph_round_mode(mode, &mode_))
      throw_error("attribute 'round_mode': unknown rounding mode '", mode, "' (expected one of ", kModeNames, ")");
    ngraph_detail::check_type_attr(info, qt_, "zero_point");
    // All inputs constant: compute once here, bit-exact with computing per run (decision 18).
    if (x_.is_constant() && scale_.is_constant() && zero_point_.is_constant()) {
      folded_ = OwnedTensor();
      run(*x_.constant(), *scale_.constant(), *zero_point_.constant(), nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) {
      void* y = ctx.output(0, folded_->shape);
      if (!folded_->bytes.empty()) std::memcpy(y, folded_->bytes.data(), folded_->bytes.size());
      return;
    }
    run(x_.get(ctx), scale_.get(ctx), zero_point_.get(ctx), &ctx, nullptr);
  }

 private:
  // Computes into ctx's output 0, or into `folded` when ctx is null.
  void run(const TensorView& x, const TensorView& s, const TensorView& z, KernelContext* ctx,
           OwnedTensor* folded) const {
    expect_dtype(x, onnx_type(rt_), "input 'input'");
    expect_dtype(s, onnx_type(rt_), "input 'scale'");
    expect_dtype(z, onnx_type(qt_), "input 'zero_point'");
    const std::vector<int64_t> axes = ngraph::normalize_axes(axes_, x.shape.size());
    const Shape p = ngraph::param_shape(x.shape, axes, s.shape, z.shape);
    const BroadcastPlan plan = make_broadcast_plan(x.shape, {x.shape, p});
    void* y;
    if (ctx) {
      y = ctx->output(0, x.shape);
    } else {
      folded->dtype = onnx_type(qt_);
      folded->shape = x.shape;
      folded->bytes.resize(static_cast<size_t>(plan.total) * ngraph::quant_type_size(qt_));
      y = folded->bytes.data();
    }
    auto body = [&](int64_t b, int64_t e) {
      ngraph::quantize(plan, rt_, qt_, x.data, s.data, z.data, y, b, e, mode_);
    };
    if (ctx) ctx->parallel_range(plan.total, kElementwiseGrain, body);
    else body(0, plan.total);
  }

  RealType rt_;
  QuantType qt_;
  ParamInput x_, scale_, zero_point_;
  std::vector<int64_t> axes_;
  RoundMode mode_ = RoundMode::kHalfEven;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> ngraph_quantize_specs(const std::string& name) {
  std::vector<OpSpec> specs;
  for (RealType rt : {RealType::kFloat32, RealType::kFloat16}) {
    for (QuantType qt : {QuantType::kInt8, QuantType::kUInt8, QuantType::kInt16, QuantType::kUInt16,
                         QuantType::kInt32}) {
      OpSpec s;
      s.name = name;
      s.inputs = {req(onnx_type(rt)), req(onnx_type(rt)), req(onnx_type(qt))};
      s.outputs = {req(onnx_type(qt))};
      s.factory = [rt, qt](const KernelInfo& info) { return std::make_unique<QuantizeKernel>(info, rt, qt); };
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

}  // namespace ortquant::ort
