// thinker BatchNorm2dInt / BatchNorm1dInt adapters (core: core/linger/batchnorm.h, decision 15).
// Inputs: x (int8, channel axis 1), then either linger 1.1.1's weight int8[C], bias int32[C], running_mean,
// running_var (the last two unused), or the seed's older mul_w[C], add_b[C] (recognized by the attribute
// scale_mul_x). Output int8/int16/int32 by o_bits (default 8).
#include "core/linger/batchnorm.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

std::vector<int64_t> int_values(const TensorView& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case kI8: v[i] = t.as<int8_t>()[i]; break;
      case kI16: v[i] = t.as<int16_t>()[i]; break;
      case kI32: v[i] = t.as<int32_t>()[i]; break;
      case kI64: v[i] = t.as<int64_t>()[i]; break;
      default: throw_error(what, " must be an integer tensor (int8/int16/int32/int64), got ", dtype_name(t.dtype));
    }
  }
  if (v.empty()) throw_error(what, " must not be empty");
  return v;
}

class BatchNormKernel : public OpKernel {
 public:
  BatchNormKernel(const KernelInfo& info, bool is_1d) : is_1d_(is_1d), w_(info, 1), b_(info, 2) {
    check_platform_quant(info);
    p_.o_bits = bits_attr(info, "o_bits", 8, 2, 32);
    out_ = int_dtype_for_bits(p_.o_bits);
    bits_attr(info, "data_bits", 8, 2, 8);
    p_.old_layout = info.has_attr("scale_mul_x");
    if (p_.old_layout) {
      const float smx = scale_attr(info, "scale_mul_x"), smw = scale_attr(info, "scale_mul_w"),
                  smo = scale_attr(info, "scale_mul_o"), sab = scale_attr(info, "scale_add_b"),
                  sao = scale_attr(info, "scale_add_o");
      p_.r_out = luna::Rescale(double(smo) / (double(smx) * double(smw)));
      p_.r_m = luna::Rescale(double(sao) / double(smo));
      p_.r_b = luna::Rescale(double(sao) / double(sab));
    } else {
      bits_attr(info, "parameter_bits", 8, 2, 8);
      const float sx = scale_attr(info, "scale_x"), sw = scale_attr(info, "scale_w"), so = scale_attr(info, "scale_o");
      p_.r_out = luna::Rescale(double(so) / (double(sx) * double(sw)));
    }
    expect_output_dtype(info, 0, out_, "o_bits=" + std::to_string(p_.o_bits));
    if (w_.is_constant() && b_.is_constant()) {
      p_.w = int_values(*w_.constant(), "input weight");
      p_.b = int_values(*b_.constant(), "input bias");
      params_ready_ = true;
    }
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input x");
    const size_t rank = x.shape.size();
    if (is_1d_ ? (rank != 2 && rank != 3) : rank < 2)
      throw_error("input x must be ", is_1d_ ? "(N, C) or (N, C, L)" : "(N, C, ...)", ", got shape ",
                  shape_str(x.shape));
    linger::BatchNormParams local;
    const linger::BatchNormParams* p = &p_;
    if (!params_ready_) {
      local = p_;
      local.w = int_values(w_.get(ctx), "input weight");
      local.b = int_values(b_.get(ctx), "input bias");
      p = &local;
    }
    const int64_t C = x.shape[1];
    for (const auto* v : {&p->w, &p->b})
      if (v->size() != 1 && static_cast<int64_t>(v->size()) != C)
        throw_error("weight and bias must have C = ", C, " values (or 1), got ", v->size());
    // Elements per (n, c) plane: the product of the trailing dims (no division: N or C may be 0).
    const int64_t inner = checked_product(x.shape.data() + 2, rank - 2, "input x plane size");
    void* y = ctx.output(0, x.shape);
    const int64_t planes = checked_mul(x.shape[0], C, "input x planes");
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
    const int8_t* xp = x.as<int8_t>();
    ctx.parallel_range(planes, grain, [&](int64_t b, int64_t e) {
      if (out_ == kI8) linger::batchnorm_int(xp, static_cast<int8_t*>(y), C, inner, *p, b, e);
      else if (out_ == kI16) linger::batchnorm_int(xp, static_cast<int16_t*>(y), C, inner, *p, b, e);
      else linger::batchnorm_int(xp, static_cast<int32_t*>(y), C, inner, *p, b, e);
    });
  }

 private:
  bool is_1d_;
  ParamInput w_, b_;
  linger::BatchNormParams p_;
  bool params_ready_ = false;
  ONNXTensorElementDataType out_ = kI8;
};

OpSpec bn_spec(const std::string& name, bool is_1d) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8), req(kAny), req(kAny), opt(kAny), opt(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [is_1d](const KernelInfo& info) { return std::make_unique<BatchNormKernel>(info, is_1d); };
  s.infer = [](const InferContext& ctx) { infer_bits_output(ctx, "o_bits", 8); };
  return s;
}

}  // namespace

OpSpec linger_batchnorm2d_spec(const std::string& name) { return bn_spec(name, false); }
OpSpec linger_batchnorm2d_spec_i16(const std::string& name) { return with_output0<kI16>(bn_spec(name, false)); }
OpSpec linger_batchnorm2d_spec_i32(const std::string& name) { return with_output0<kI32>(bn_spec(name, false)); }
OpSpec linger_batchnorm1d_spec(const std::string& name) { return bn_spec(name, true); }
OpSpec linger_batchnorm1d_spec_i16(const std::string& name) { return with_output0<kI16>(bn_spec(name, true)); }
OpSpec linger_batchnorm1d_spec_i32(const std::string& name) { return with_output0<kI32>(bn_spec(name, true)); }

}  // namespace ortquant::ort
