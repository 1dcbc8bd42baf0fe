// QONNX BipolarQuant adapter: no attributes; a node on constant inputs is computed once at creation.
#include "core/qonnx/bipolar_quant.h"

#include "ort/kernels/qonnx/elementwise.h"
#include "ort/kernels/qonnx/qonnx_ops.h"

namespace ortquant::ort {
namespace {

using namespace qonnx_elementwise;

class BipolarQuantKernel : public OpKernel {
 public:
  explicit BipolarQuantKernel(const KernelInfo& info) : x_(info, 0), scale_(info, 1) {
    if (x_.is_constant() && scale_.is_constant()) {
      folded_ = OwnedTensor();
      run(*x_.constant(), *scale_.constant(), nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    run(x_.get(ctx), scale_.get(ctx), &ctx, nullptr);
  }

 private:
  static void run(const TensorView& x, const TensorView& s, KernelContext* ctx, OwnedTensor* folded) {
    expect_dtype(x, kFloat, "input X");
    expect_dtype(s, kFloat, "input scale");
    const Shape out = broadcast_shapes({x.shape, s.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape});
    float* y = output_buffer(ctx, folded, out);
    run_range(ctx, plan.total, [&](int64_t b, int64_t e) {
      qonnx::bipolar_quant(plan, x.as<float>(), s.as<float>(), y, b, e);
    });
  }

  ParamInput x_, scale_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec bipolar_quant_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat), req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<BipolarQuantKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
