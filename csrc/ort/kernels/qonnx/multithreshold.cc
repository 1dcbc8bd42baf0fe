// QONNX MultiThreshold adapter. Channel axis as qonnx main (decision 8): data_layout defaults to "NCHW";
// a layout ending in 'C' means channels-last (last axis), anything else channel axis 1. Constant thresholds are
// prepared (sorted per channel) once at creation; an all-constant node is computed once at creation.
#include "core/qonnx/multithreshold.h"
#include "core/qonnx/wide_params.h"

#include <optional>

#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

// Elements per parallel task: each element costs a binary search of a few steps.
constexpr int64_t kGrain = 1 << 14;

void check_thresholds(const TensorView& t) {
  if (t.dtype != kFloat && t.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE &&
      t.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
    throw_error("input thresholds must be float32, float64 or int64, got ", dtype_name(t.dtype));
  if (t.shape.size() != 2)
    throw_error("input thresholds must be 2-D (channels or 1, number of thresholds), got shape ", shape_str(t.shape));
}

// float64 / int64 thresholds become the float32 thresholds with the same outcome for every float32 X (numpy
// compares float32 with float64 exactly; core/qonnx/wide_params.h).
qonnx::ThresholdTable prepare(const TensorView& t) {
  if (t.dtype == kFloat) return qonnx::prepare_thresholds(t.as<float>(), t.shape[0], t.shape[1]);
  std::vector<float> f(static_cast<size_t>(t.size()));
  if (t.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) qonnx::thresholds_to_f32(t.as<double>(), f.data(), t.size());
  else qonnx::thresholds_i64_to_f32(t.as<int64_t>(), f.data(), t.size());
  return qonnx::prepare_thresholds(f.data(), t.shape[0], t.shape[1]);
}

class MultiThresholdKernel : public OpKernel {
 public:
  explicit MultiThresholdKernel(const KernelInfo& info) : x_(info, 0), thr_(info, 1) {
    (void)info.attr_string("out_dtype", "");  // qonnx uses it for datatype inference only; checked for its type
    scale_ = info.attr_float("out_scale", 1.0f);
    bias_ = info.attr_float("out_bias", 0.0f);
    // qonnx main: channels-last iff the layout string ends in 'C'. An empty string is taken as the default.
    const std::string layout = info.attr_string("data_layout", "NCHW");
    channels_last_ = !layout.empty() && layout.back() == 'C';
    if (thr_.is_constant()) {
      check_thresholds(*thr_.constant());
      table_ = prepare(*thr_.constant());
    }
    if (x_.is_constant() && table_) {
      folded_ = OwnedTensor();
      run(*x_.constant(), *table_, OutputSink(*folded_));
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    const TensorView x = x_.get(ctx);
    if (table_) return run(x, *table_, OutputSink(ctx));
    const TensorView t = thr_.get(ctx);
    check_thresholds(t);
    run(x, prepare(t), OutputSink(ctx));
  }

 private:
  // Validates x against `rows` threshold rows; returns the view of x's channels.
  qonnx::ThresholdView check_shapes(const TensorView& x, int64_t rows) const {
    expect_dtype(x, kFloat, "input X");
    const size_t rank = x.shape.size();
    if (rank == 0) throw_error("input X must have at least one dimension (the channel axis)");
    if (!channels_last_ && rank < 2)
      throw_error("input X has shape ", shape_str(x.shape),
                  " but a channels-first data_layout needs the channels on axis 1 (rank >= 2)");
    const size_t axis = channels_last_ ? rank - 1 : 1;
    const int64_t channels = x.shape[axis];
    if (rows != 1 && rows != channels)
      throw_error("input thresholds has ", rows, " rows; it needs 1 or one per channel (", channels,
                  ", axis ", axis, " of input X with shape ", shape_str(x.shape), ")");
    qonnx::ThresholdView v;
    v.channels = channels;
    v.inner = 1;
    if (!channels_last_)
      for (size_t d = 2; d < rank; ++d) v.inner *= x.shape[d];
    return v;
  }

  void run(const TensorView& x, const qonnx::ThresholdTable& table, const OutputSink& out) const {
    const qonnx::ThresholdView view = check_shapes(x, table.channels);
    float* y = out.alloc_f32(x.shape);
    const int64_t total = x.size();
    if (total == 0) return;
    const float* xp = x.as<float>();
    out.parallel_range(total, kGrain, [&](int64_t b, int64_t e) {
      qonnx::multithreshold(table, view, xp, y, b, e, scale_, bias_);
    });
  }

  ParamInput x_, thr_;
  float scale_ = 1.0f, bias_ = 0.0f;
  bool channels_last_ = false;
  std::optional<qonnx::ThresholdTable> table_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec multithreshold_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat), req(kAny)};  // thresholds float32, float64 or int64 (checked by the kernel)
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<MultiThresholdKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
