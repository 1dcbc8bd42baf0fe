// ortquant.integer::QuantCodes and Rescale: integer mode's float-exact backend. QuantCodes writes the integer
// values q - z of the activation quantizer as float32; onnxruntime's own float Conv / Gemm / MatMul then sums
// integer-valued products exactly (the transform only uses this form when every partial sum is an integer below
// 2^24), and Rescale applies the same float64 rescale as QConv / QGemm. Same bits as the engine backend.
#include <cmath>
#include <optional>
#include <string>

#include "core/integer/qlayer.h"
#include "ort/kernels/integer/integer_ops.h"

namespace ortquant::ort {
namespace {

constexpr ONNXTensorElementDataType kF64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;

class QuantCodesKernel : public OpKernel {
 public:
  explicit QuantCodesKernel(const KernelInfo& info)
      : act_(integer_act_quant(info)), check_(info.attr_string("act_check", "")) {}

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kFloat, "input X");
    float* y = ctx.output_as<float>(0, x.shape);
    const float* src = x.as<float>();
    check_on_grid(check_, act_, src, x.size());
    ctx.parallel_range(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      integer::quantize_values(act_, src + b, y + b, e - b);
    });
  }

 private:
  integer::ActQuant act_;
  std::string check_;  // act_check (check_on_grid)
};

class RescaleKernel : public OpKernel {
 public:
  explicit RescaleKernel(const KernelInfo& info) {
    relu_ = info.attr_bool("relu", false);
    axis_ = info.attr_int("axis", 1);
    for (size_t i : {size_t{1}, size_t{2}}) {
      std::optional<OwnedTensor> t = info.constant_input(i);
      if (!t) throw_error("input ", i == 1 ? "S" : "B", " must be a constant initializer");
      if (t->dtype != kF64) throw_error("input ", i == 1 ? "S" : "B", " must be double");
      const double* d = t->view().as<double>();
      (i == 1 ? s_ : b_).assign(d, d + t->view().size());
    }
    if (s_.size() != b_.size()) throw_error("inputs S and B must have the same length");
    for (size_t j = 0; j < s_.size(); ++j)
      if (!std::isfinite(s_[j]) || !std::isfinite(b_[j])) throw_error("inputs S and B must be finite");
    corr_.assign(s_.size(), 0);
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kFloat, "input ACC");
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank) throw_error("attribute 'axis' ", axis_, " is out of range for rank ", rank);
    const int64_t c = x.shape[static_cast<size_t>(axis)];
    if (c != static_cast<int64_t>(s_.size()))
      throw_error("input ACC has ", c, " channels on axis ", axis_, " but S has ", s_.size(), " values");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[static_cast<size_t>(i)];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= x.shape[static_cast<size_t>(i)];
    float* y = ctx.output_as<float>(0, x.shape);
    if (x.size() == 0) return;
    integer::rescale_f32(x.as<float>(), y, outer, c, inner, corr_.data(), s_.data(), b_.data(), relu_);
  }

 private:
  bool relu_ = false;
  int64_t axis_ = 1;
  std::vector<double> s_, b_;
  std::vector<int64_t> corr_;
};

}  // namespace

OpSpec quant_codes_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QuantCodesKernel>(info); };
  return s;
}

OpSpec rescale_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat), req(kF64), req(kF64)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<RescaleKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
