// thinker iqCat adapter (core: core/linger/iqcat.h): N int8 inputs (variadic), attributes scale_x_0 .. scale_x_{N-1},
// scale_o, dim (negative counts from the end), platform_quant.
#include "core/linger/iqcat.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

class IqCatKernel : public OpKernel {
 public:
  explicit IqCatKernel(const KernelInfo& info) {
    check_platform_quant(info);
    const size_t n = info.input_count();
    const float so = scale_attr(info, "scale_o");
    dim_ = info.attr_int("dim");
    for (size_t i = 0; i < n; ++i) {
      const std::string a = "scale_x_" + std::to_string(i);
      const float s = scale_attr(info, a.c_str());
      maps_.push_back(linger::UnaryI8::requant(luna::Rescale(double(so) / double(s))));
    }
    const std::string extra = "scale_x_" + std::to_string(n);
    if (info.has_attr(extra.c_str()))
      throw_error("attribute '", extra, "' is present but the node has only ", n, " inputs");
  }

  void compute(KernelContext& ctx) const override {
    const size_t n = ctx.input_count();
    if (n != maps_.size()) throw_error("expected ", maps_.size(), " inputs, got ", n);
    std::vector<TensorView> in;
    for (size_t i = 0; i < n; ++i) {
      in.push_back(ctx.required_input(i));
      if (in.back().dtype != kI8) throw_error("input ", i, " must be int8, got ", dtype_name(in.back().dtype));
    }
    const Shape& s0 = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s0.size());
    if (rank == 0) throw_error("inputs must have rank >= 1 to be concatenated");
    const int64_t axis = dim_ < 0 ? dim_ + rank : dim_;
    if (axis < 0 || axis >= rank) throw_error("dim ", dim_, " is out of range for rank ", rank);
    Shape out = s0;
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i = 0; i < n; ++i) {
      const Shape& s = in[i].shape;
      if (static_cast<int64_t>(s.size()) != rank)
        throw_error("input ", i, " has shape ", shape_str(s), ", rank differs from input 0 ", shape_str(s0));
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && s[static_cast<size_t>(d)] != s0[static_cast<size_t>(d)])
          throw_error("input ", i, " has shape ", shape_str(s), ", which differs from input 0 ", shape_str(s0),
                      " outside dim ", axis);
      out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
    }
    int64_t trailing = 1;
    for (int64_t d = axis + 1; d < rank; ++d) trailing *= s0[static_cast<size_t>(d)];
    std::vector<linger::CatPart> parts(n);
    for (size_t i = 0; i < n; ++i) {
      parts[i].data = in[i].as<int8_t>();
      parts[i].inner = in[i].shape[static_cast<size_t>(axis)] * trailing;
      parts[i].map = &maps_[i];
    }
    int8_t* y = ctx.output_as<int8_t>(0, out);
    ctx.parallel_range(shape_size(out), kElementwiseGrain,
                       [&](int64_t b, int64_t e) { linger::iqcat(parts, y, b, e); });
  }

 private:
  int64_t dim_ = 0;
  std::vector<linger::UnaryI8> maps_;
};

void infer_iqcat(const InferContext& ctx) {
  const size_t n = ctx.input_count();
  InferContext::Dims out;
  if (!ctx.input_shape(0, &out)) return;
  const int64_t rank = static_cast<int64_t>(out.rank());
  int64_t axis = ctx.attr_int("dim", 0);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank) return;
  const size_t a = static_cast<size_t>(axis);
  for (size_t i = 1; i < n; ++i) {
    InferContext::Dims d;
    if (!ctx.input_shape(i, &d) || d.rank() != out.rank()) return;
    if (out.dims[a] < 0 || d.dims[a] < 0) {
      out.dims[a] = -1;  // an unknown size along dim: the sum is unknown too
      out.sym[a] = InferContext::fresh_dim();
    } else {
      out.dims[a] += d.dims[a];
    }
  }
  ctx.set_output(0, kI8, out);
}

}  // namespace

OpSpec linger_iqcat_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {var(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<IqCatKernel>(info); };
  s.infer = &infer_iqcat;
  return s;
}

}  // namespace ortquant::ort
