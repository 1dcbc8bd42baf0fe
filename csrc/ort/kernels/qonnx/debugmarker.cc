// QONNX DebugMarker adapter: the identity. qonnx also stores the value in its execution context under
// `export_debug_name`; an onnxruntime graph has no such side channel, so only the output is produced.
#include <cstring>
#include <optional>

#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

class DebugMarkerKernel : public OpKernel {
 public:
  explicit DebugMarkerKernel(const KernelInfo& info) : x_(info, 0) {
    (void)info.attr_string("export_debug_name");  // required by qonnx
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
  static void run(const TensorView& x, const OutputSink& out) {
    expect_dtype(x, kFloat, "input X");
    float* y = out.alloc_f32(x.shape);
    const float* xp = x.as<float>();
    out.parallel_range(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      std::memcpy(y + b, xp + b, static_cast<size_t>(e - b) * sizeof(float));
    });
  }

  ParamInput x_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec debugmarker_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<DebugMarkerKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
