// Conv2dInt and Conv1dInt (thinker / onnxinfer): o = requant(conv(x, W) + b), NCHW / NCL int8, W int8
// [M, C/group, kH(, kW)], b int32 [M] (linger.md section 3). Attributes kernel_shape (optional, must match W),
// strides, pads ([top, left, bottom, right]; 1-D: [begin, end]), dilations, group, scale_x, scale_w,
// [scale_o, o_bits]. Conv1dInt runs as a Conv2d on one row. A constant W is prepared (packed) at creation.
#include "core/conv/conv.h"
#include "ort/kernels/linger/linger_matrix_ops.h"
#include "ort/kernels/linger/matrix_common.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace matrix;

// Spatial rank 2 (Conv2dInt) or 1 (Conv1dInt).
template <int R>
class ConvIntKernel : public OpKernel {
 public:
  explicit ConvIntKernel(const KernelInfo& info) : w_(info, 1), b_(info, 2) {
    out_ = output_spec(info, "scale_x", "scale_w");
    check_dtype(info.input_dtype(0), kI8, "input x");
    check_dtype(info.input_dtype(1), kI8, "input weight");
    if (b_.present()) check_dtype(info.input_dtype(2), kI32, "input bias");
    const std::string auto_pad = info.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET") throw_error("attribute 'auto_pad' is not supported (got '", auto_pad, "'), use pads");
    kernel_shape_ = info.attr_ints("kernel_shape", {});
    if (!kernel_shape_.empty() && kernel_shape_.size() != R)
      throw_error("attribute 'kernel_shape' must have ", R, " values, got ", kernel_shape_.size());
    const auto strides = ints_attr(info, "strides", R, std::vector<int64_t>(R, 1));
    const auto dilations = ints_attr(info, "dilations", R, std::vector<int64_t>(R, 1));
    const auto pads = ints_attr(info, "pads", 2 * R, std::vector<int64_t>(2 * R, 0));
    a_.group = info.attr_int("group", 1);
    if (R == 2) {
      a_.sh = strides[0], a_.sw = strides[1];
      a_.dh = dilations[0], a_.dw = dilations[1];
      a_.pt = pads[0], a_.pl = pads[1], a_.pb = pads[2], a_.pr = pads[3];
    } else {
      a_.sw = strides[0];
      a_.dw = dilations[0];
      a_.pl = pads[0], a_.pr = pads[1];
    }
    if (!kernel_shape_.empty()) {
      a_.kh = R == 2 ? kernel_shape_[0] : 1;
      a_.kw = kernel_shape_[R - 1];
    }
    conv::validate_attrs(a_, false);
    if (w_.is_constant()) {
      conv_.emplace(prepare(*w_.constant()));
      if (b_.is_constant()) bias_data(b_.constant(), w_.constant()->shape[0]);
    }
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    check_dtype(x.dtype, kI8, "input x");
    if (x.shape.size() != R + 2)
      throw_error("input x must be ", R + 2, "-D ", R == 2 ? "[N, C, H, W]" : "[N, C, L]", ", got shape ",
                  shape_str(x.shape));
    std::optional<conv::Conv2d> local;
    if (!conv_) local.emplace(prepare(w_.get(ctx)));
    const conv::Conv2d& c = conv_ ? *conv_ : *local;
    const Shape xs = R == 2 ? x.shape : Shape{x.shape[0], x.shape[1], 1, x.shape[2]};
    const Shape os = c.output_shape(xs);
    gemm::Epilogue ep = out_.ep;
    ep.bias = bias_data(b_.get_optional(ctx), os[1]);
    void* y = ctx.output(0, R == 2 ? os : Shape{os[0], os[1], os[3]});
    c.run(x.as<int8_t>(), xs, ep, y, parallel(ctx));
  }

 private:
  // Validates W against the attributes and prepares it.
  conv::Conv2d prepare(const TensorView& w) const {
    check_dtype(w.dtype, kI8, "input weight");
    if (w.shape.size() != R + 2)
      throw_error("input weight must be ", R + 2, "-D ", R == 2 ? "[M, C/group, kH, kW]" : "[M, C/group, k]",
                  ", got shape ", shape_str(w.shape));
    for (int i = 0; i < R && !kernel_shape_.empty(); ++i) {
      if (kernel_shape_[static_cast<size_t>(i)] != w.shape[static_cast<size_t>(2 + i)])
        throw_error("attribute 'kernel_shape' ", shape_str(kernel_shape_), " does not match the weight shape ",
                    shape_str(w.shape));
    }
    conv::ConvAttrs a = a_;
    a.kh = R == 2 ? w.shape[2] : 1;
    a.kw = w.shape[R + 1];
    return conv::Conv2d(w.as<int8_t>(), w.shape[0], w.shape[1], a);
  }

  ParamInput w_, b_;
  OutputSpec out_;
  conv::ConvAttrs a_;
  std::vector<int64_t> kernel_shape_;
  std::optional<conv::Conv2d> conv_;
};

template <int R>
void infer(const InferContext& ctx) {
  InferContext::Dims x, w;
  if (!ctx.input_shape(0, &x) || x.rank() != R + 2) return;
  const bool have_w = ctx.input_shape(1, &w) && w.rank() == R + 2;
  std::vector<int64_t> ks = ctx.attr_ints("kernel_shape");
  if (ks.size() != R && have_w) {
    ks.clear();
    for (int i = 0; i < R; ++i) ks.push_back(w.dims[static_cast<size_t>(2 + i)]);
  }
  std::vector<int64_t> st = ctx.attr_ints("strides"), di = ctx.attr_ints("dilations"), pa = ctx.attr_ints("pads");
  if (st.size() != R) st.assign(R, 1);
  if (di.size() != R) di.assign(R, 1);
  if (pa.size() != 2 * R) pa.assign(2 * R, 0);
  // The attributes are validated (the kernel's own checks, limits included) before any size is computed from
  // them; a bad model declares nothing here and fails at kernel creation with the message.
  conv::ConvAttrs a;
  a.group = ctx.attr_int("group", 1);
  a.sw = st[R - 1], a.dw = di[R - 1], a.pl = pa[0], a.pr = pa[R];
  if (R == 2) a.sh = st[0], a.dh = di[0], a.pt = pa[0], a.pl = pa[1], a.pb = pa[2], a.pr = pa[3];
  try {
    conv::validate_attrs(a, false);
  } catch (const Error&) {
    // Declare the output type only (the shape unknown), so that type resolution picks the kernel the attributes
    // ask for and kernel creation reports the bad attribute.
    InferContext::Dims u;
    for (size_t k = 0; k < R + 2; ++k) {
      u.dims.push_back(-1);
      u.sym.push_back(InferContext::fresh_dim());
    }
    ctx.set_output(0, infer_out_dtype(ctx), u);
    return;
  }
  InferContext::Dims y;
  y.dims = {x.dims[0], have_w ? w.dims[0] : -1};
  y.sym = {x.sym[0], have_w ? w.sym[0] : InferContext::fresh_dim()};
  for (size_t i = 0; i < R; ++i) {
    int64_t d = -1;
    if (ks.size() == R && x.dims[2 + i] >= 0 && ks[i] >= 1 && ks[i] <= kMaxGeometry) {
      try {
        d = conv::conv_out_dim(x.dims[2 + i], ks[i], st[i], di[i], pa[i], pa[i + R], "size");
      } catch (const Error&) {
        d = -1;
      }
    }
    y.dims.push_back(d);
    y.sym.push_back(d < 0 ? InferContext::fresh_dim() : std::string());
  }
  for (size_t i = 0; i < y.rank(); ++i)
    if (y.dims[i] < 0 && y.sym[i].empty()) y.sym[i] = InferContext::fresh_dim();
  ctx.set_output(0, infer_out_dtype(ctx), y);
}

template <int R>
OpSpec spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kAny), opt(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<ConvIntKernel<R>>(info); };
  s.infer = &infer<R>;
  return s;
}

}  // namespace

OpSpec conv2d_int_spec(const std::string& name) { return spec<2>(name); }
OpSpec conv2d_int_spec_i16(const std::string& name) { return with_output0<kI16>(spec<2>(name)); }
OpSpec conv2d_int_spec_i32(const std::string& name) { return with_output0<kI32>(spec<2>(name)); }
OpSpec conv2d_int_spec_f32(const std::string& name) { return with_output0<kFloat>(spec<2>(name)); }
OpSpec conv1d_int_spec(const std::string& name) { return spec<1>(name); }
OpSpec conv1d_int_spec_i16(const std::string& name) { return with_output0<kI16>(spec<1>(name)); }
OpSpec conv1d_int_spec_i32(const std::string& name) { return with_output0<kI32>(spec<1>(name)); }
OpSpec conv1d_int_spec_f32(const std::string& name) { return with_output0<kFloat>(spec<1>(name)); }

}  // namespace ortquant::ort
