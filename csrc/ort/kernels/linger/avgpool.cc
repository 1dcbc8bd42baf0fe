// thinker AvgPool2dInt adapter (core: core/linger/avgpool.h). int8 NCHW; attributes kernel_shape, strides, pads
// ([top, left, bottom, right]; linger writes [ph, pw, ph, pw]), ceil_mode, data_bits (<= 8), scale_x, and
// optionally o_bits (= data_bits) and scale_o (= scale_x): linger's output scale is the input scale.
#include "core/linger/avgpool.h"

#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;

class AvgPoolKernel : public OpKernel {
 public:
  explicit AvgPoolKernel(const KernelInfo& info) {
    check_platform_quant(info);
    const float sx = scale_attr(info, "scale_x");
    p_.bits = bits_attr(info, "data_bits", 8, 2, 8);
    if (info.has_attr("o_bits") && info.attr_int("o_bits") != p_.bits)
      throw_error("attribute 'o_bits' (", info.attr_int("o_bits"), ") must equal data_bits (", p_.bits, ")");
    if (info.has_attr("scale_o") && scale_attr(info, "scale_o") != sx)
      throw_error("attribute 'scale_o' must equal scale_x (AvgPool2dInt keeps the input scale)");
    const std::vector<int64_t> k = info.attr_ints("kernel_shape");
    if (k.size() != 2) throw_error("attribute 'kernel_shape' must have 2 values, got ", k.size());
    const std::vector<int64_t> s = info.attr_ints("strides", {1, 1});
    if (s.size() != 2) throw_error("attribute 'strides' must have 2 values, got ", s.size());
    std::vector<int64_t> pads = info.attr_ints("pads", {0, 0, 0, 0});
    if (pads.size() == 2) pads = {pads[0], pads[1], pads[0], pads[1]};
    if (pads.size() != 4) throw_error("attribute 'pads' must have 4 values, got ", pads.size());
    for (const char* a : {"dilations"}) {
      if (info.has_attr(a))
        for (int64_t d : info.attr_ints(a))
          if (d != 1) throw_error("attribute 'dilations' must be 1 (average pooling has no dilation)");
    }
    if (!info.attr_bool("count_include_pad", true))
      throw_error("count_include_pad=0 is not supported (linger always counts the padding)");
    p_.kh = k[0];
    p_.kw = k[1];
    p_.sh = s[0];
    p_.sw = s[1];
    p_.pt = pads[0];
    p_.pl = pads[1];
    p_.pb = pads[2];
    p_.pr = pads[3];
    p_.ceil_mode = info.attr_bool("ceil_mode", false);
    p_.validate();
  }
  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    expect_dtype(x, kI8, "input x");
    const Shape out = linger::avgpool2d_shape(x.shape, p_);
    int8_t* y = ctx.output_as<int8_t>(0, out);
    const int64_t planes = out[0] * out[1];
    const int64_t per_plane = std::max<int64_t>(1, out[2] * out[3] * p_.kh * p_.kw);
    ctx.parallel_range(planes, std::max<int64_t>(1, kElementwiseGrain / per_plane),
                       [&](int64_t b, int64_t e) { linger::avgpool2d(x.as<int8_t>(), x.shape, p_, y, b, e); });
  }

 private:
  linger::Pool2dParams p_;
};

void infer_avgpool(const InferContext& ctx) {
  InferContext::Dims in;
  if (!ctx.input_shape(0, &in) || in.rank() != 4) return;
  const std::vector<int64_t> k = ctx.attr_ints("kernel_shape");
  std::vector<int64_t> s = ctx.attr_ints("strides"), pads = ctx.attr_ints("pads");
  if (s.empty()) s = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (pads.size() == 2) pads = {pads[0], pads[1], pads[0], pads[1]};
  if (k.size() != 2 || s.size() != 2 || pads.size() != 4) return;
  const bool ceil = ctx.attr_int("ceil_mode", 0) != 0;
  // The attributes are validated (core) before any size is computed from them: a bad model declares nothing
  // here and fails at kernel creation with the message.
  linger::Pool2dParams p;
  p.kh = k[0], p.kw = k[1], p.sh = s[0], p.sw = s[1], p.pt = pads[0], p.pl = pads[1], p.pb = pads[2], p.pr = pads[3];
  try {
    p.validate();
  } catch (const Error&) {
    return;
  }
  InferContext::Dims out = in;
  for (size_t a = 0; a < 2; ++a) {
    if (in.dims[2 + a] < 0) continue;  // symbolic spatial size: a fresh unknown
    try {
      out.dims[2 + a] = linger::pool_out_size(in.dims[2 + a], k[a], s[a], pads[a], pads[a + 2], ceil);
    } catch (const Error&) {
      return;
    }
  }
  for (size_t a = 2; a < 4; ++a)
    if (in.dims[a] < 0) out.sym[a] = InferContext::fresh_dim();
  ctx.set_output(0, kI8, out);
}

}  // namespace

OpSpec linger_avgpool_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<AvgPoolKernel>(info); };
  s.infer = &infer_avgpool;
  return s;
}

}  // namespace ortquant::ort
