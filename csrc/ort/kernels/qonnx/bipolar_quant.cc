// QONNX BipolarQuant adapter: no attributes; a node on constant inputs is computed once at creation. X and scale
// are each float32 or float16; the output is float16 when both are (qonnx returns numpy's dtype), else float32.
// X and scale may also be float32/float64 with at least one float64: float32 output (qonnx returns float64 there,
// docs/ops.md says why we do not).
#include "core/qonnx/bipolar_quant.h"
#include "core/qonnx/wide_params.h"

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
    if (x.dtype == kDouble || s.dtype == kDouble) {
      expect_wide(x, "input X");
      expect_wide(s, "input scale");
      const Shape out = broadcast_shapes({x.shape, s.shape});
      const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape});
      float* y = output_buffer(ctx, folded, out);
      run_range(ctx, plan.total, [&](int64_t b, int64_t e) {
        qonnx::bipolar_quant_wide(plan, {x.data, x.dtype == kDouble}, {s.data, s.dtype == kDouble}, y, b, e);
      });
      return;
    }
    const bool x16 = is_float16(x, "input X");
    const bool s16 = is_float16(s, "input scale");
    const Shape out = broadcast_shapes({x.shape, s.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape});
    void* y = output_buffer(ctx, folded, out, x16 && s16);
    run_range(ctx, plan.total, [&](int64_t b, int64_t e) {
      if (!x16 && !s16) qonnx::bipolar_quant(plan, x.as<float>(), s.as<float>(), static_cast<float*>(y), b, e);
      else qonnx::bipolar_quant_mixed(plan, x.data, x16, s.data, s16, y, b, e);
    });
  }

  ParamInput x_, scale_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> bipolar_quant_specs(const std::string& name) {
  using qonnx_elementwise::kFloat16;
  using qonnx_elementwise::kDouble;
  const ONNXTensorElementDataType combos[7][3] = {  // X, scale -> Y; all-float32 first
      {kFloat, kFloat, kFloat},
      {kFloat16, kFloat16, kFloat16},
      {kFloat16, kFloat, kFloat},
      {kFloat, kFloat16, kFloat},
      {kFloat, kDouble, kFloat},
      {kDouble, kFloat, kFloat},
      {kDouble, kDouble, kFloat}};
  std::vector<OpSpec> specs;
  for (const auto& c : combos) {
    OpSpec s;
    s.name = name;
    s.inputs = {req(c[0]), req(c[1])};
    s.outputs = {req(c[2])};
    s.factory = [](const KernelInfo& info) { return std::make_unique<BipolarQuantKernel>(info); };
    specs.push_back(std::move(s));
  }
  return specs;
}

}  // namespace ortquant::ort
