// QONNX Im2Col adapter. Per-sample definition (decision 8: qonnx 1.0.0 interleaves samples for batch > 1) and no
// datatype annotation needed. `input_shape` (qonnx: shape inference only) and `depthwise` (qonnx: FINN
// conversion only) are accepted and not used.
#include "core/qonnx/im2col.h"

#include <algorithm>
#include <optional>

#include "ort/kernels/qonnx/attr_check.h"
#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

class Im2ColKernel : public OpKernel {
 public:
  explicit Im2ColKernel(const KernelInfo& info) : x_(info, 0) {
    const auto stride = required_ints(info, "stride", 2, 1);
    const auto kernel = required_ints(info, "kernel_size", 2, 1);
    const auto pads = optional_ints(info, "pad_amount", 4, 0, {0, 0, 0, 0});
    const auto dil = optional_ints(info, "dilations", 2, 1, {1, 1});
    (void)info.attr_bool("depthwise", false);
    (void)info.attr_string("input_shape", "");
    // qonnx pads with numpy, which converts the Python int through float64 to float32.
    p_.pad_value = static_cast<float>(static_cast<double>(info.attr_int("pad_value", 0)));
    p_.kernel_h = kernel[0];
    p_.kernel_w = kernel[1];
    p_.stride_h = stride[0];
    p_.stride_w = stride[1];
    p_.dilation_h = dil[0];
    p_.dilation_w = dil[1];
    p_.pad_top = pads[0];
    p_.pad_left = pads[1];
    p_.pad_bottom = pads[2];
    p_.pad_right = pads[3];
    if (x_.is_constant()) {
      folded_ = OwnedTensor();
      run(*x_.constant(), OutputSink(*folded_));
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    run(x_.get(ctx), OutputSink(ctx));
  }

 private:
  void run(const TensorView& x, const OutputSink& out) const {
    expect_dtype(x, kFloat, "input X");
    const qonnx::Im2ColDims d = qonnx::im2col_dims(x.shape, p_);
    float* y = out.alloc_f32({d.n, d.oh, d.ow, d.row_size(p_)});
    const float* xp = x.as<float>();
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, d.row_size(p_)));
    out.parallel_range(d.rows(), grain, [&](int64_t r0, int64_t r1) { qonnx::im2col_nhwc(xp, y, d, p_, r0, r1); });
  }

  ParamInput x_;
  qonnx::Im2ColParams p_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec im2col_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<Im2ColKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
