// nGraph Dequantize adapter: attributes and constant inputs at creation, core ngraph::dequantize per run.
#include "core/ngraph/dequantize.h"

#include <cstring>

#include "ort/kernels/ngraph/ngraph_common.h"
#include "ort/kernels/ngraph/ngraph_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using ngraph::QuantType;
using ngraph::RealType;
using ngraph_detail::onnx_type;

class DequantizeKernel : public OpKernel {
 public:
  DequantizeKernel(const KernelInfo& info, QuantType qt, RealType rt)
      : qt_(qt), rt_(rt), q_(info, 0), scale_(info, 1), zero_point_(info, 2) {
    axes_ = info.attr_ints("axes", {});
    ngraph::check_axes(axes_);
    ngraph_detail::check_type_attr(info, rt_, "scale");
    // All inputs constant (a dequantized weight): compute once here, bit-exact with computing per run.
    if (q_.is_constant() && scale_.is_constant() && zero_point_.is_constant()) {
      folded_ = OwnedTensor();
      run(*q_.constant(), *scale_.constant(), *zero_point_.constant(), nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) {
      void* y = ctx.output(0, folded_->shape);
      if (!folded_->bytes.empty()) std::memcpy(y, folded_->bytes.data(), folded_->bytes.size());
      return;
    }
    run(q_.get(ctx), scale_.get(ctx), zero_point_.get(ctx), &ctx, nullptr);
  }

 private:
  // Computes into ctx's output 0, or into `folded` when ctx is null.
  void run(const TensorView& q, const TensorView& s, const TensorView& z, KernelContext* ctx,
           OwnedTensor* folded) const {
    expect_dtype(q, onnx_type(qt_), "input 'input'");
    expect_dtype(s, onnx_type(rt_), "input 'scale'");
    expect_dtype(z, onnx_type(qt_), "input 'zero_point'");
    const std::vector<int64_t> axes = ngraph::normalize_axes(axes_, q.shape.size());
    const Shape p = ngraph::param_shape(q.shape, axes, s.shape, z.shape);
    const BroadcastPlan plan = make_broadcast_plan(q.shape, {q.shape, p});
    void* y;
    if (ctx) {
      y = ctx->output(0, q.shape);
    } else {
      folded->dtype = onnx_type(rt_);
      folded->shape = q.shape;
      folded->bytes.resize(static_cast<size_t>(plan.total) * ngraph::real_type_size(rt_));
      y = folded->bytes.data();
    }
    auto body = [&](int64_t b, int64_t e) { ngraph::dequantize(plan, qt_, rt_, q.data, s.data, z.data, y, b, e); };
    if (ctx) ctx->parallel_range(plan.total, kElementwiseGrain, body);
    else body(0, plan.total);
  }

  QuantType qt_;
  RealType rt_;
  ParamInput q_, scale_, zero_point_;
  std::vector<int64_t> axes_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> ngraph_dequantize_specs(const std::string& name) {
  std::vector<OpSpec> specs;
  for (RealType rt : {RealType::kFloat32, RealType::kFloat16}) {
    for (QuantType qt : {QuantType::kInt8, QuantType::kUInt8, QuantType::kInt16, QuantType::kUInt16,
                         QuantType::kInt32}) {
      OpSpec s;
      s.name = name;
      s.inputs = {req(onnx_type(qt)), req(onnx_type(rt)), req(onnx_type(qt))};
      s.outputs = {req(onnx_type(rt))};
      s.factory = [qt, rt](const KernelInfo& info) { return std::make_unique<DequantizeKernel>(info, qt, rt); };
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

}  // namespace ortquant::ort
