// thinker iqSum adapter (core: core/linger/iqsum.h). Attribute `dims`: an INT or INTS (as the exporter wrote the
// first positional argument of x.sum), absent = all axes. linger never writes keepdim; ortquant reads an optional
// `keepdims` (default 0).
#include "core/linger/iqsum.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

class IqSumKernel : public OpKernel {
 public:
  explicit IqSumKernel(const KernelInfo& info) {
    check_platform_quant(info);
    const float sx = scale_attr(info, "scale_x"), so = scale_attr(info, "scale_o");
    r_ = luna::Rescale(double(so) / double(sx));
    if (info.has_attr("dims")) {
      try {
        dims_ = {info.attr_int("dims")};
      } catch (const Error&) {
        dims_ = info.attr_ints("dims");
        if (dims_.empty()) throw_error("attribute 'dims' is empty");
      }
    }
    keepdims_ = info.attr_bool("keepdims", false);
  }
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input x");
    const std::vector<int64_t> axes = linger::normalize_axes(dims_, x.shape.size());
    int8_t* y = ctx.output_as<int8_t>(0, linger::reduced_shape(x.shape, axes, keepdims_));
    linger::iqsum(x.as<int8_t>(), x.shape, axes, y, r_);
  }

 private:
  luna::Rescale r_;
  std::vector<int64_t> dims_;
  bool keepdims_ = false;
};

void infer_iqsum(const InferContext& ctx) {
  InferContext::Dims in, out;
  if (!ctx.input_shape(0, &in)) return;
  std::vector<int64_t> dims = ctx.attr_ints("dims");
  if (dims.empty() && ctx.has_attr("dims")) dims = {ctx.attr_int("dims", 0)};
  const bool keep = ctx.attr_int("keepdims", 0) != 0;
  const int64_t rank = static_cast<int64_t>(in.rank());
  std::vector<bool> red(in.rank(), dims.empty());
  for (int64_t d : dims) {
    const int64_t a = d < 0 ? d + rank : d;
    if (a < 0 || a >= rank) return;
    red[static_cast<size_t>(a)] = true;
  }
  for (size_t i = 0; i < in.rank(); ++i) {
    if (!red[i]) {
      out.dims.push_back(in.dims[i]);
      out.sym.push_back(in.sym[i]);
    } else if (keep) {
      out.dims.push_back(1);
      out.sym.emplace_back();
    }
  }
  if (out.rank() == 0) return;  // a 0-d result cannot be declared apart from "unknown" (see InferContext)
  ctx.set_output(0, kI8, out);
}

}  // namespace

OpSpec linger_iqsum_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<IqSumKernel>(info); };
  s.infer = &infer_iqsum;
  return s;
}

}  // namespace ortquant::ort
