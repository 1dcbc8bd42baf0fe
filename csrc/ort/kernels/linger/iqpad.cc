// thinker iqPad adapter (core: core/linger/iqpad.h): inputs x int8, pads int64 [2 * rank] (a runtime tensor in
// linger exports), value int8 scalar (optional, default 0); attribute mode = "constant".
#include "core/linger/iqpad.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

class IqPadKernel : public OpKernel {
 public:
  explicit IqPadKernel(const KernelInfo& info) {
    const std::string mode = info.attr_string("mode", "constant");
    if (mode != "constant") throw_error("unsupported mode '", mode, "' (linger exports only constant padding as iqPad)");
  }
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input x");
    const TensorView p = ctx.required_input(1);
    expect_dtype(p, kI64, "input pads");
    if (p.shape.size() != 1) throw_error("input pads must be 1-D, got shape ", shape_str(p.shape));
    const std::vector<int64_t> pads(p.as<int64_t>(), p.as<int64_t>() + p.size());
    int8_t value = 0;
    if (auto v = ctx.input(2)) {
      expect_dtype(*v, kI8, "input value");
      if (v->size() != 1) throw_error("input value must have one element, got shape ", shape_str(v->shape));
      value = *v->as<int8_t>();
    }
    const Shape out = linger::pad_shape(x.shape, pads);
    linger::iqpad(x.as<int8_t>(), x.shape, pads, value, ctx.output_as<int8_t>(0, out));
  }
};

}  // namespace

OpSpec linger_iqpad_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8), req(kI64), opt(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<IqPadKernel>(info); };
  // The sizes depend on the runtime pads: declare the rank with unknown sizes.
  s.infer = [](const InferContext& ctx) {
    InferContext::Dims d;
    if (!ctx.input_shape(0, &d)) return;
    for (size_t i = 0; i < d.rank(); ++i) {
      d.dims[i] = -1;
      d.sym[i] = InferContext::fresh_dim();
    }
    ctx.set_output(0, kI8, d);
  };
  return s;
}

}  // namespace ortquant::ort
