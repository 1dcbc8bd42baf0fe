// QONNX MaxPoolNHWC adapter: ONNX MaxPool attributes on an NHWC tensor. qonnx runs the node as an ONNX MaxPool
// (opset 11) on the transposed tensor, so the geometry (pads < kernel, ceil_mode output size) is onnxruntime's.
#include "core/qonnx/maxpoolnhwc.h"

#include <algorithm>
#include <optional>

#include "ort/kernels/qonnx/attr_check.h"
#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

class MaxPoolNhwcKernel : public OpKernel {
 public:
  explicit MaxPoolNhwcKernel(const KernelInfo& info) : x_(info, 0) {
    const auto kernel = required_ints(info, "kernel_shape", 2, 1);
    const auto pads = required_ints(info, "pads", 4, 0);
    const auto strides = required_ints(info, "strides", 2, 1);
    p_.ceil_mode = info.attr_bool("ceil_mode", false);
    if (pads[0] >= kernel[0] || pads[2] >= kernel[0] || pads[1] >= kernel[1] || pads[3] >= kernel[1])
      throw_error("attribute 'pads' ", ints_str(pads), " must be smaller than 'kernel_shape' ", ints_str(kernel),
                  " (as ONNX MaxPool requires)");
    const auto dil = info.attr_ints("dilations", {1, 1});
    if (dil != std::vector<int64_t>{1, 1})
      throw_error("attribute 'dilations' ", ints_str(dil), " is not supported (MaxPoolNHWC has no dilations)");
    const std::string auto_pad = info.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET")
      throw_error("attribute 'auto_pad' '", auto_pad, "' is not supported (MaxPoolNHWC takes explicit 'pads')");
    p_.kernel_h = kernel[0];
    p_.kernel_w = kernel[1];
    p_.stride_h = strides[0];
    p_.stride_w = strides[1];
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
    const qonnx::Pool2dDims d = qonnx::pool2d_dims(x.shape, p_, true);
    float* y = out.alloc_f32({d.n, d.oh, d.ow, d.c});
    const int64_t rows = d.n * d.oh * d.ow;
    const int64_t per_row = std::max<int64_t>(1, d.c * p_.kernel_h * p_.kernel_w);
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / per_row);
    const float* xp = x.as<float>();
    out.parallel_range(rows, grain, [&](int64_t r0, int64_t r1) { qonnx::maxpool_nhwc(xp, y, d, p_, r0, r1); });
  }

  ParamInput x_;
  qonnx::Pool2dParams p_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec maxpoolnhwc_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<MaxPoolNhwcKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
