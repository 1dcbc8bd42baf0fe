// thinker Quant / Dequant / Requant adapters (core: core/linger/quant.h).
#include "core/linger/quant.h"

#include <cstring>

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

// Output of a kernel whose inputs are all constant: computed once at creation (decision 18).
struct Folded {
  std::optional<OwnedTensor> value;
  bool emit(KernelContext& ctx) const {
    if (!value) return false;
    void* y = ctx.output(0, value->shape);
    if (!value->bytes.empty()) std::memcpy(y, value->bytes.data(), value->bytes.size());
    return true;
  }
};

// Allocates output 0 in ctx, or in `fold` when ctx is null.
void* alloc_out(KernelContext* ctx, OwnedTensor* fold, ONNXTensorElementDataType t, const Shape& shape) {
  if (ctx) return ctx->output(0, shape);
  fold->dtype = t;
  fold->shape = shape;
  fold->bytes.resize(static_cast<size_t>(shape_size(shape)) * dtype_size(t));
  return fold->bytes.data();
}

// ---- Quant ----------------------------------------------------------------------------------------------

class QuantKernel : public OpKernel {
 public:
  explicit QuantKernel(const KernelInfo& info) : x_(info, 0) {
    check_platform_quant(info);
    scale_ = scale_attr(info, "scale_x");
    bits_ = bits_attr(info, "data_bits", 8, 2, 32);
    out_ = int_dtype_for_bits(bits_);
    expect_output_dtype(info, 0, out_, "data_bits=" + std::to_string(bits_));
    if (x_.is_constant()) {
      fold_.value = OwnedTensor();
      run(*x_.constant(), nullptr, &*fold_.value);
    }
  }
  void compute(KernelContext& ctx) const override {
    if (!fold_.emit(ctx)) run(x_.get(ctx), &ctx, nullptr);
  }

 private:
  void run(const TensorView& x, KernelContext* ctx, OwnedTensor* fold) const {
    expect_dtype(x, kFloat, "input x");
    void* y = alloc_out(ctx, fold, out_, x.shape);
    const float* xp = x.as<float>();
    auto body = [&](int64_t b, int64_t e) {
      if (out_ == kI8) linger::quant(xp + b, static_cast<int8_t*>(y) + b, e - b, scale_, bits_);
      else if (out_ == kI16) linger::quant(xp + b, static_cast<int16_t*>(y) + b, e - b, scale_, bits_);
      else linger::quant(xp + b, static_cast<int32_t*>(y) + b, e - b, scale_, bits_);
    };
    if (ctx) ctx->parallel_range(x.size(), kElementwiseGrain, body);
    else body(0, x.size());
  }
  ParamInput x_;
  float scale_ = 1.f;
  int bits_ = 8;
  ONNXTensorElementDataType out_ = kI8;
  Folded fold_;
};

// ---- Dequant --------------------------------------------------------------------------------------------

class DequantKernel : public OpKernel {
 public:
  explicit DequantKernel(const KernelInfo& info) : x_(info, 0) {
    // linger's post-pass writes scale_o; iqtensor.dequantlinear would write scale_x.
    scale_ = scale_attr(info, info.has_attr("scale_o") || !info.has_attr("scale_x") ? "scale_o" : "scale_x");
    check_platform_quant(info);
    if (x_.is_constant()) {
      fold_.value = OwnedTensor();
      run(*x_.constant(), nullptr, &*fold_.value);
    }
  }
  void compute(KernelContext& ctx) const override {
    if (!fold_.emit(ctx)) run(x_.get(ctx), &ctx, nullptr);
  }

 private:
  void run(const TensorView& x, KernelContext* ctx, OwnedTensor* fold) const {
    float* y = static_cast<float*>(alloc_out(ctx, fold, kFloat, x.shape));
    const int64_t n = x.size();
    auto body = [&](int64_t b, int64_t e) {
      switch (x.dtype) {
        case kI8: linger::dequant(x.as<int8_t>() + b, y + b, e - b, scale_); break;
        case kI16: linger::dequant(x.as<int16_t>() + b, y + b, e - b, scale_); break;
        case kI32: linger::dequant(x.as<int32_t>() + b, y + b, e - b, scale_); break;
        default:  // float32: already dequantized (linger writes Dequant(scale_o=1.0) after float outputs)
          std::memcpy(y + b, x.as<float>() + b, static_cast<size_t>(e - b) * sizeof(float));
      }
    };
    if (x.dtype != kI8 && x.dtype != kI16 && x.dtype != kI32 && x.dtype != kFloat)
      throw_error("input x must be int8, int16, int32 or float32, got ", dtype_name(x.dtype));
    if (ctx) ctx->parallel_range(n, kElementwiseGrain, body);
    else body(0, n);
  }
  ParamInput x_;
  float scale_ = 1.f;
  Folded fold_;
};

// ---- Requant --------------------------------------------------------------------------------------------

class RequantKernel : public OpKernel {
 public:
  explicit RequantKernel(const KernelInfo& info) : x_(info, 0) {
    check_platform_quant(info);
    const float sx = scale_attr(info, "scale_x"), so = scale_attr(info, "scale_o");
    d_bits_ = bits_attr(info, "data_bits", -1, 2, 32);
    o_bits_ = bits_attr(info, "o_bits", -1, 2, 32);
    r_ = luna::Rescale(double(so) / double(sx));
    in_ = int_dtype_for_bits(d_bits_);
    out_ = int_dtype_for_bits(o_bits_);
    expect_output_dtype(info, 0, out_, "o_bits=" + std::to_string(o_bits_));
    if (x_.is_constant()) {
      fold_.value = OwnedTensor();
      run(*x_.constant(), nullptr, &*fold_.value);
    }
  }
  void compute(KernelContext& ctx) const override {
    if (!fold_.emit(ctx)) run(x_.get(ctx), &ctx, nullptr);
  }

 private:
  template <class Ti, class To>
  void typed(const Ti* x, To* y, int64_t n, KernelContext* ctx) const {
    auto body = [&](int64_t b, int64_t e) { linger::requant(x + b, y + b, e - b, r_, o_bits_); };
    if (ctx) ctx->parallel_range(n, kElementwiseGrain, body);
    else body(0, n);
  }
  template <class Ti>
  void typed_in(const Ti* x, void* y, int64_t n, KernelContext* ctx) const {
    if (out_ == kI8) typed(x, static_cast<int8_t*>(y), n, ctx);
    else if (out_ == kI16) typed(x, static_cast<int16_t*>(y), n, ctx);
    else typed(x, static_cast<int32_t*>(y), n, ctx);
  }
  void run(const TensorView& x, KernelContext* ctx, OwnedTensor* fold) const {
    if (x.dtype != in_)
      throw_error("input x must be ", dtype_name(in_), " for data_bits=", d_bits_, ", got ", dtype_name(x.dtype));
    void* y = alloc_out(ctx, fold, out_, x.shape);
    if (in_ == kI8) typed_in(x.as<int8_t>(), y, x.size(), ctx);
    else if (in_ == kI16) typed_in(x.as<int16_t>(), y, x.size(), ctx);
    else typed_in(x.as<int32_t>(), y, x.size(), ctx);
  }
  ParamInput x_;
  luna::Rescale r_;
  int d_bits_ = 8, o_bits_ = 8;
  ONNXTensorElementDataType in_ = kI8, out_ = kI8;
  Folded fold_;
};

}  // namespace

OpSpec linger_quant_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<QuantKernel>(info); };
  s.infer = [](const InferContext& ctx) { infer_bits_output(ctx, "data_bits", 8); };
  return s;
}
OpSpec linger_quant_spec_i16(const std::string& name) { return with_output0<kI16>(linger_quant_spec(name)); }
OpSpec linger_quant_spec_i32(const std::string& name) { return with_output0<kI32>(linger_quant_spec(name)); }

OpSpec linger_dequant_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<DequantKernel>(info); };
  return s;
}

OpSpec linger_requant_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<RequantKernel>(info); };
  s.infer = [](const InferContext& ctx) { infer_bits_output(ctx, "o_bits", 8); };
  return s;
}
OpSpec linger_requant_spec_i16(const std::string& name) { return with_output0<kI16>(linger_requant_spec(name)); }
OpSpec linger_requant_spec_i32(const std::string& name) { return with_output0<kI32>(linger_requant_spec(name)); }

}  // namespace ortquant::ort
