// QONNX QuantAvgPool2d adapter (FINN's legacy integer average pool). qonnx runs an onnxruntime AveragePool and
// post-processes it in numpy; this kernel computes the same per output (see core/qonnx/quantavgpool2d.h).
#include "core/qonnx/quantavgpool2d.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "ort/kernels/qonnx/attr_check.h"
#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

class QuantAvgPool2dKernel : public OpKernel {
 public:
  explicit QuantAvgPool2dKernel(const KernelInfo& info) : x_(info, 0) {
    p_.kernel = info.attr_int("kernel");
    p_.stride = info.attr_int("stride");
    if (p_.stride < 1) throw_error("attribute 'stride' must be >= 1, got ", p_.stride);
    p_.shift = qonnx::quant_avgpool_shift(info.attr_int("ibits"), info.attr_int("obits"), p_.kernel);
    (void)info.attr_bool("signed", false);  // qonnx uses it for datatype inference only
    const std::string layout = info.attr_string("data_layout", "NCHW");
    if (layout != "NCHW" && layout != "NHWC")
      throw_error("attribute 'data_layout' must be \"NCHW\" or \"NHWC\", got \"", layout, "\"");
    channels_last_ = layout == "NHWC";
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
    const qonnx::Pool2dDims d = qonnx::pool2d_dims(x.shape, p_.geometry(), channels_last_);
    const float* xp = x.as<float>();
    const int64_t window = p_.kernel * p_.kernel;
    if (channels_last_) {
      float* y = out.alloc_f32({d.n, d.oh, d.ow, d.c});
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, d.c * window));
      out.parallel_range(d.n * d.oh * d.ow, grain,
                         [&](int64_t r0, int64_t r1) { qonnx::quant_avgpool_nhwc(xp, y, d, p_, r0, r1); });
    } else {
      float* y = out.alloc_f32({d.n, d.c, d.oh, d.ow});
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, d.ow * window));
      out.parallel_range(d.n * d.c * d.oh, grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> scratch(static_cast<size_t>(d.ow));
        qonnx::quant_avgpool_nchw(xp, y, d, p_, scratch.data(), r0, r1);
      });
    }
  }

  ParamInput x_;
  qonnx::QuantAvgPoolParams p_;
  bool channels_last_ = false;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec quantavgpool2d_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QuantAvgPool2dKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
