// thinker iqClamp / iqSigmoid / iqTanh / Relu adapters (core: core/linger/iqclamp.h, activation.h, relu.h).
#include <cmath>
#include <cstring>

#include "core/linger/activation.h"
#include "core/linger/iqclamp.h"
#include "core/linger/relu.h"
#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

// ---- iqClamp --------------------------------------------------------------------------------------------

class IqClampKernel : public OpKernel {
 public:
  explicit IqClampKernel(const KernelInfo& info) {
    check_platform_quant(info);
    const float sx = scale_attr(info, "scale_x"), so = scale_attr(info, "scale_o");
    map_ = linger::make_iqclamp(sx, so, info.attr_float("min"), info.attr_float("max"));
  }
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input x");
    int8_t* y = ctx.output_as<int8_t>(0, x.shape);
    const int8_t* xp = x.as<int8_t>();
    ctx.parallel_range(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) { map_.run(xp + b, y + b, e - b); });
  }

 private:
  linger::UnaryI8 map_;
};

// ---- iqSigmoid / iqTanh ---------------------------------------------------------------------------------

class ActivationKernel : public OpKernel {
 public:
  ActivationKernel(const KernelInfo& info, linger::Activation act) {
    check_platform_quant(info);
    const float sx = scale_attr(info, "scale_x");
    if (info.has_attr("scale_o")) {
      const float so = scale_attr(info, "scale_o");
      if (so != 128.f) throw_error("attribute 'scale_o' must be 128 (the Q7 output of the table), got ", so);
    }
    const std::string castor = info.attr_string("castor_mode", "luna");
    if (castor != "luna") throw_error("unsupported castor_mode '", castor, "' (only luna)");
    // The seed's table attributes (decision 13): validated, otherwise ignored (the tables are fixed).
    if (info.has_attr("table_len") && info.attr_int("table_len") <= 0)
      throw_error("attribute 'table_len' must be positive, got ", info.attr_int("table_len"));
    for (const char* b : {"sigmoid_bound", "tanh_bound"}) {
      if (info.has_attr(b)) {
        const float v = info.attr_float(b);
        if (!(v > 0.f) || !std::isfinite(v)) throw_error("attribute '", b, "' must be finite and positive, got ", v);
      }
    }
    t8_ = linger::make_activation_table(act, sx, 8);
    t16_ = linger::make_activation_table(act, sx, 16);
  }
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    int8_t* y = ctx.output_as<int8_t>(0, x.shape);
    if (x.dtype == kI16) {
      const int16_t* xp = x.as<int16_t>();
      ctx.parallel_range(x.size(), kElementwiseGrain,
                         [&](int64_t b, int64_t e) { linger::activation_lookup(xp + b, y + b, e - b, t16_.data()); });
    } else if (x.dtype == kI8) {
      const int8_t* xp = x.as<int8_t>();
      ctx.parallel_range(x.size(), kElementwiseGrain,
                         [&](int64_t b, int64_t e) { linger::activation_lookup(xp + b, y + b, e - b, t8_.data()); });
    } else {
      throw_error("input x must be int16 (as linger writes it) or int8, got ", dtype_name(x.dtype));
    }
  }

 private:
  std::vector<int8_t> t8_, t16_;
};

// ---- Relu -----------------------------------------------------------------------------------------------

class ReluKernel : public OpKernel {
 public:
  explicit ReluKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    void* y = ctx.output(0, x.shape);
    switch (x.dtype) {
      case kI8: run(x.as<int8_t>(), static_cast<int8_t*>(y), x.size(), ctx); break;
      case kI32: run(x.as<int32_t>(), static_cast<int32_t*>(y), x.size(), ctx); break;
      case kFloat: run(x.as<float>(), static_cast<float*>(y), x.size(), ctx); break;
      default: throw_error("input x must be int8, int32 or float32, got ", dtype_name(x.dtype));
    }
  }

 private:
  template <class T>
  static void run(const T* x, T* y, int64_t n, KernelContext& ctx) {
    ctx.parallel_range(n, kElementwiseGrain, [&](int64_t b, int64_t e) { linger::relu(x + b, y + b, e - b); });
  }
};

// ---- LayerNormInt ---------------------------------------------------------------------------------------

std::unique_ptr<OpKernel> layernorm_factory(const KernelInfo&) {
  throw_error("LayerNormInt is not supported: no reference semantics (linger 1.1.1 calls its closed extension "
              "with the wrong arguments, so LayerNormInt never ran there)");
}

}  // namespace

OpSpec linger_iqclamp_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<IqClampKernel>(info); };
  s.infer = &infer_like_input0<kI8>;
  return s;
}

OpSpec linger_iqsigmoid_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) {
    return std::make_unique<ActivationKernel>(info, linger::Activation::kSigmoid);
  };
  s.infer = &infer_like_input0<kI8>;
  return s;
}

OpSpec linger_iqtanh_spec(const std::string& name) {
  OpSpec s = linger_iqsigmoid_spec(name);
  s.factory = [](const KernelInfo& info) { return std::make_unique<ActivationKernel>(info, linger::Activation::kTanh); };
  return s;
}

OpSpec linger_relu_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny)};
  s.outputs = {req(kAny)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<ReluKernel>(info); };
  s.infer = &infer_same_as_input0;
  return s;
}

OpSpec linger_layernorm_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {var(kAny)};  // whatever the exporter wrote: the kernel refuses the node with a clear message
  s.variadic_homogeneous = false;
  s.outputs = {req(kI8)};
  s.factory = &layernorm_factory;
  return s;
}

}  // namespace ortquant::ort
