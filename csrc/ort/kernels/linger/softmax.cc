// thinker SoftmaxInt / LogSoftmaxInt adapters (core: core/linger/softmax.h). Input int8 (or int16, data_bits 16);
// output int8/int16/int32 by o_bits, or float32 when the node has no o_bits (linger's o_bits=None form).
#include "core/linger/softmax.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

class SoftmaxKernel : public OpKernel {
 public:
  SoftmaxKernel(const KernelInfo& info, linger::SoftmaxKind kind) : kind_(kind) {
    check_platform_quant(info);
    sx_ = scale_attr(info, "scale_x");
    d_bits_ = bits_attr(info, "data_bits", 8, 2, 16);
    dim_ = info.attr_int("dim");
    const bool has_o = info.has_attr("o_bits"), has_so = info.has_attr("scale_o");
    if (has_o != has_so) throw_error("attributes 'o_bits' and 'scale_o' must be given together (or neither)");
    ONNXTensorElementDataType want = kFloat;
    if (has_o) {
      out_.o_bits = bits_attr(info, "o_bits", -1, 2, 32);
      out_.scale_o = scale_attr(info, "scale_o");
      want = int_dtype_for_bits(out_.o_bits);
    } else {
      out_.is_float = true;
    }
    out_type_ = want;
    expect_output_dtype(info, 0, want, has_o ? "o_bits=" + std::to_string(out_.o_bits) : std::string("no o_bits"));
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    const ONNXTensorElementDataType want_in = int_dtype_for_bits(d_bits_);
    if (x.dtype != want_in)
      throw_error("input x must be ", dtype_name(want_in), " for data_bits=", d_bits_, ", got ", dtype_name(x.dtype));
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank == 0) throw_error("input x must have rank >= 1");
    const int64_t axis = dim_ < 0 ? dim_ + rank : dim_;
    if (axis < 0 || axis >= rank) throw_error("dim ", dim_, " is out of range for rank ", rank);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[static_cast<size_t>(d)];
    const int64_t n = x.shape[static_cast<size_t>(axis)];
    void* y = ctx.output(0, x.shape);
    if (x.size() == 0) return;
    const int64_t rows = outer * inner;
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1));
    if (x.dtype == kI8) dispatch(x.as<int8_t>(), y, outer, n, inner, rows, grain, ctx);
    else dispatch(x.as<int16_t>(), y, outer, n, inner, rows, grain, ctx);
  }

 private:
  template <class Ti>
  void dispatch(const Ti* x, void* y, int64_t outer, int64_t n, int64_t inner, int64_t rows, int64_t grain,
                KernelContext& ctx) const {
    switch (out_type_) {
      case kI8: run(x, static_cast<int8_t*>(y), outer, n, inner, rows, grain, ctx); break;
      case kI16: run(x, static_cast<int16_t*>(y), outer, n, inner, rows, grain, ctx); break;
      case kI32: run(x, static_cast<int32_t*>(y), outer, n, inner, rows, grain, ctx); break;
      default: run(x, static_cast<float*>(y), outer, n, inner, rows, grain, ctx); break;
    }
  }
  template <class Ti, class To>
  void run(const Ti* x, To* y, int64_t outer, int64_t n, int64_t inner, int64_t rows, int64_t grain,
           KernelContext& ctx) const {
    ctx.parallel_range(rows, grain, [&](int64_t b, int64_t e) {
      linger::softmax_int(kind_, x, y, outer, n, inner, sx_, out_, b, e);
    });
  }

  linger::SoftmaxKind kind_;
  float sx_ = 1.f;
  int d_bits_ = 8;
  int64_t dim_ = -1;
  linger::SoftmaxOutput out_;
  ONNXTensorElementDataType out_type_ = kI8;
};

OpSpec softmax_spec(const std::string& name, linger::SoftmaxKind kind) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [kind](const KernelInfo& info) { return std::make_unique<SoftmaxKernel>(info, kind); };
  s.infer = [](const InferContext& ctx) { infer_bits_output(ctx, "o_bits", 8, /*float_if_absent=*/true); };
  return s;
}

}  // namespace

OpSpec linger_softmax_spec(const std::string& name) { return softmax_spec(name, linger::SoftmaxKind::kSoftmax); }
OpSpec linger_softmax_spec_i16(const std::string& name) { return with_output0<kI16>(linger_softmax_spec(name)); }
OpSpec linger_softmax_spec_i32(const std::string& name) { return with_output0<kI32>(linger_softmax_spec(name)); }
OpSpec linger_softmax_spec_f32(const std::string& name) { return with_output0<kFloat>(linger_softmax_spec(name)); }
OpSpec linger_logsoftmax_spec(const std::string& name) {
  return softmax_spec(name, linger::SoftmaxKind::kLogSoftmax);
}
OpSpec linger_logsoftmax_spec_i16(const std::string& name) { return with_output0<kI16>(linger_logsoftmax_spec(name)); }
OpSpec linger_logsoftmax_spec_i32(const std::string& name) { return with_output0<kI32>(linger_logsoftmax_spec(name)); }
OpSpec linger_logsoftmax_spec_f32(const std::string& name) { return with_output0<kFloat>(linger_logsoftmax_spec(name)); }

}  // namespace ortquant::ort
