// ConvTranspose2dInt (thinker / onnxinfer): o = requant(conv_transpose(x, W) + b), NCHW int8, W int8
// [C, M/group, kH, kW], b int32 [M]. `pads` has torch's meaning ([p, p, p, p] as linger writes it: the output
// is cropped by p on each side, linger.md section 3), output size (H-1)*s - pt - pb + d*(k-1) + output_padding + 1.
// A constant W is packed at creation.
#include "core/conv/conv.h"
#include "ort/kernels/linger/linger_matrix_ops.h"
#include "ort/kernels/linger/matrix_common.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace matrix;

class ConvTransposeIntKernel : public OpKernel {
 public:
  explicit ConvTransposeIntKernel(const KernelInfo& info) : w_(info, 1), b_(info, 2) {
    out_ = output_spec(info, "scale_x", "scale_w");
    check_dtype(info.input_dtype(0), kI8, "input x");
    check_dtype(info.input_dtype(1), kI8, "input weight");
    if (b_.present()) check_dtype(info.input_dtype(2), kI32, "input bias");
    const std::string auto_pad = info.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET") throw_error("attribute 'auto_pad' is not supported (got '", auto_pad, "'), use pads");
    if (info.has_attr("output_shape")) throw_error("attribute 'output_shape' is not supported, use pads and output_padding");
    kernel_shape_ = info.attr_ints("kernel_shape", {});
    if (!kernel_shape_.empty() && kernel_shape_.size() != 2)
      throw_error("attribute 'kernel_shape' must have 2 values, got ", kernel_shape_.size());
    const auto strides = ints_attr(info, "strides", 2, {1, 1});
    const auto dilations = ints_attr(info, "dilations", 2, {1, 1});
    const auto pads = ints_attr(info, "pads", 4, {0, 0, 0, 0});
    const auto outpad = ints_attr(info, "output_padding", 2, {0, 0});
    a_.group = info.attr_int("group", 1);
    a_.sh = strides[0], a_.sw = strides[1];
    a_.dh = dilations[0], a_.dw = dilations[1];
    a_.pt = pads[0], a_.pl = pads[1], a_.pb = pads[2], a_.pr = pads[3];
    a_.oph = outpad[0], a_.opw = outpad[1];
    if (!kernel_shape_.empty()) a_.kh = kernel_shape_[0], a_.kw = kernel_shape_[1];
    conv::validate_attrs(a_, true);
    if (w_.is_constant()) {
      const TensorView w = *w_.constant();
      conv_.emplace(prepare(w));
      if (b_.is_constant()) bias_data(b_.constant(), w.shape[1] * a_.group);
    }
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    check_dtype(x.dtype, kI8, "input x");
    std::optional<conv::ConvTranspose2d> local;
    if (!conv_) local.emplace(prepare(w_.get(ctx)));
    const conv::ConvTranspose2d& c = conv_ ? *conv_ : *local;
    const Shape os = c.output_shape(x.shape);
    gemm::Epilogue ep = out_.ep;
    ep.bias = bias_data(b_.get_optional(ctx), os[1]);
    void* y = ctx.output(0, os);
    c.run(x.as<int8_t>(), x.shape, ep, y, parallel(ctx));
  }

 private:
  conv::ConvTranspose2d prepare(const TensorView& w) const {
    check_dtype(w.dtype, kI8, "input weight");
    if (w.shape.size() != 4)
      throw_error("input weight must be 4-D [C, M/group, kH, kW], got shape ", shape_str(w.shape));
    if (!kernel_shape_.empty() && (kernel_shape_[0] != w.shape[2] || kernel_shape_[1] != w.shape[3]))
      throw_error("attribute 'kernel_shape' ", shape_str(kernel_shape_), " does not match the weight shape ",
                  shape_str(w.shape));
    conv::ConvAttrs a = a_;
    a.kh = w.shape[2];
    a.kw = w.shape[3];
    return conv::ConvTranspose2d(w.as<int8_t>(), w.shape[0], w.shape[1], a);
  }

  ParamInput w_, b_;
  OutputSpec out_;
  conv::ConvAttrs a_;
  std::vector<int64_t> kernel_shape_;
  std::optional<conv::ConvTranspose2d> conv_;
};

void infer(const InferContext& ctx) {
  InferContext::Dims x, w;
  if (!ctx.input_shape(0, &x) || x.rank() != 4) return;
  const bool have_w = ctx.input_shape(1, &w) && w.rank() == 4;
  std::vector<int64_t> ks = ctx.attr_ints("kernel_shape");
  if (ks.size() != 2 && have_w) ks = {w.dims[2], w.dims[3]};
  std::vector<int64_t> st = ctx.attr_ints("strides"), di = ctx.attr_ints("dilations"), pa = ctx.attr_ints("pads"),
                       op = ctx.attr_ints("output_padding");
  if (st.size() != 2) st.assign(2, 1);
  if (di.size() != 2) di.assign(2, 1);
  if (pa.size() != 4) pa.assign(4, 0);
  if (op.size() != 2) op.assign(2, 0);
  // Validated (the kernel's checks and limits) before any size is computed from the attributes.
  conv::ConvAttrs a;
  a.group = ctx.attr_int("group", 1);
  a.sh = st[0], a.sw = st[1], a.dh = di[0], a.dw = di[1];
  a.pt = pa[0], a.pl = pa[1], a.pb = pa[2], a.pr = pa[3], a.oph = op[0], a.opw = op[1];
  try {
    conv::validate_attrs(a, true);
  } catch (const Error&) {
    // Declare the output type only (the shape unknown), so that type resolution picks the kernel the attributes
    // ask for and kernel creation reports the bad attribute.
    InferContext::Dims u;
    for (size_t k = 0; k < 4; ++k) {
      u.dims.push_back(-1);
      u.sym.push_back(InferContext::fresh_dim());
    }
    ctx.set_output(0, infer_out_dtype(ctx), u);
    return;
  }
  const int64_t group = a.group;
  InferContext::Dims y;
  int64_t m = -1;
  if (have_w && w.dims[1] >= 0 && !__builtin_mul_overflow(w.dims[1], group, &m)) {
  } else {
    m = -1;
  }
  y.dims = {x.dims[0], m};
  y.sym = {x.sym[0], m < 0 ? InferContext::fresh_dim() : std::string()};
  for (size_t i = 0; i < 2; ++i) {
    int64_t d = -1;
    if (ks.size() == 2 && x.dims[2 + i] >= 1 && ks[i] >= 1 && ks[i] <= kMaxGeometry) {
      try {
        d = conv::conv_transpose_out_dim(x.dims[2 + i], ks[i], st[i], di[i], pa[i], pa[i + 2], op[i], "size");
      } catch (const Error&) {
        d = -1;
      }
    }
    if (d < 1) d = -1;
    y.dims.push_back(d);
    y.sym.push_back(d < 0 ? InferContext::fresh_dim() : std::string());
  }
  ctx.set_output(0, infer_out_dtype(ctx), y);
}

OpSpec spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kAny), opt(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<ConvTransposeIntKernel>(info); };
  s.infer = &infer;
  return s;
}

}  // namespace

OpSpec conv_transpose2d_int_spec(const std::string& name) { return spec(name); }
OpSpec conv_transpose2d_int_spec_i16(const std::string& name) { return with_output0<kI16>(spec(name)); }
OpSpec conv_transpose2d_int_spec_i32(const std::string& name) { return with_output0<kI32>(spec(name)); }
OpSpec conv_transpose2d_int_spec_f32(const std::string& name) { return with_output0<kFloat>(spec(name)); }

}  // namespace ortquant::ort
