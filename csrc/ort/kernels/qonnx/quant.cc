// QONNX Quant / IntQuant adapter: attributes and constant inputs at creation, core::qonnx::int_quant per run.
// X, scale and zeropt are each float32 or float16, or each float32 or float64 (one OpSpec per combination, output
// float32); the bit width is float32, int32, float16, float64 or int64.
#include "core/qonnx/quant.h"

#include <cstring>

#include "core/qonnx/wide_params.h"

#include "ort/kernels/qonnx/elementwise.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using qonnx_elementwise::expect_wide;
using qonnx_elementwise::is_float16;
using qonnx_elementwise::is_int_type;
using qonnx_elementwise::promote_int_param;
using qonnx_elementwise::kDouble;
using qonnx_elementwise::kFloat16;

class QuantKernel : public OpKernel {
 public:
  explicit QuantKernel(const KernelInfo& info)
      : x_(info, 0), scale_(info, 1), zeropt_(info, 2), bitwidth_(info, 3) {
    signed_ = info.attr_bool("signed", true);
    narrow_ = info.attr_bool("narrow", false);
    const std::string mode = info.attr_string("rounding_mode", "ROUND");
    if (!parse_qonnx_round_mode(mode, &mode_)) throw_error("attribute 'rounding_mode': unknown rounding mode '", mode, "'");
    // Integer scales and zero points (qonnx's QKeras/hls4ml converter writes int64) are promoted once, as numpy does.
    if (scale_.is_constant() && is_int_type(scale_.constant()->dtype)) {
      scale_promoted_ = OwnedTensor();
      promote_int_param(*scale_.constant(), *scale_promoted_, "scale");
    }
    if (zeropt_.is_constant() && is_int_type(zeropt_.constant()->dtype)) {
      zeropt_promoted_ = OwnedTensor();
      promote_int_param(*zeropt_.constant(), *zeropt_promoted_, "zeropt");
    }
    // Inputs all constant (a weight quantizer): compute once here, bit-exact with computing per run.
    if (x_.is_constant() && scale_.is_constant() && zeropt_.is_constant() && bitwidth_.is_constant()) {
      folded_ = OwnedTensor();
      run(*x_.constant(), param(scale_, scale_promoted_, nullptr), param(zeropt_, zeropt_promoted_, nullptr), *bitwidth_.constant(), nullptr, &*folded_);
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) {
      void* y = ctx.output(0, folded_->shape);
      if (!folded_->bytes.empty()) std::memcpy(y, folded_->bytes.data(), folded_->bytes.size());
      return;
    }
    run(x_.get(ctx), param(scale_, scale_promoted_, &ctx), param(zeropt_, zeropt_promoted_, &ctx), bitwidth_.get(ctx), &ctx, nullptr);
  }

 private:
  // scale or zeropt as run() takes it: float16/32/64 as given, an integer constant promoted at creation.
  static TensorView param(const ParamInput& p, const std::optional<OwnedTensor>& promoted, const KernelContext* ctx) {
    if (promoted) return promoted->view();
    return ctx ? p.get(*ctx) : *p.constant();
  }

  // Computes into ctx's output 0, or into `folded` when ctx is null.
  void run(const TensorView& x, const TensorView& scale, const TensorView& zeropt, const TensorView& b,
           KernelContext* ctx, OwnedTensor* folded) const {
    // Runtime integer scales or zero points (rare: exporters store them as initializers) are promoted per call.
    OwnedTensor s_promoted, z_promoted;
    const bool int_s = is_int_type(scale.dtype), int_z = is_int_type(zeropt.dtype);
    const TensorView s = int_s ? promote_int_param(scale, s_promoted, "scale") : scale;
    const TensorView z = int_z ? promote_int_param(zeropt, z_promoted, "zeropt") : zeropt;
    const bool any_int = int_s || int_z || scale_promoted_ || zeropt_promoted_;
    if (any_int && (x.dtype == kFloat16 || s.dtype == kFloat16 || z.dtype == kFloat16))
      throw_error("an integer scale or zeropt with float16 X, scale or zeropt is not supported; use float16 or "
                  "float32 parameters");
    const bool wide = x.dtype == kDouble || s.dtype == kDouble || z.dtype == kDouble;
    const bool x16 = !wide && is_float16(x, "input X");
    const bool s16 = !wide && is_float16(s, "input scale");
    const bool z16 = !wide && is_float16(z, "input zeropt");
    if (wide) {
      expect_wide(x, "input X");
      expect_wide(s, "input scale");
      expect_wide(z, "input zeropt");
    }
    if (b.size() != 1) throw_error("input bitwidth must have exactly one element, got shape ", shape_str(b.shape));
    // Bounds in the bit width's own precision (b64), and as the float32/float16 data paths use them (bounds).
    qonnx::IntQuantBounds64 b64;
    qonnx::IntQuantBounds bounds;
    if (b.dtype == kFloat) {
      bounds = qonnx::int_quant_bounds(signed_, narrow_, *b.as<float>());
      b64 = qonnx::widen(bounds);
    } else if (b.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
      bounds = qonnx::int_quant_bounds_int(signed_, narrow_, *b.as<int32_t>());
      b64 = qonnx::int_quant_bounds_i64(signed_, narrow_, *b.as<int32_t>());
    } else if (b.dtype == kFloat16) {
      bounds = qonnx::int_quant_bounds_half(signed_, narrow_, *b.as<uint16_t>());
      b64 = qonnx::widen(bounds);
    } else if (b.dtype == kDouble) {
      if (x16 || s16 || z16) throw_error("a float64 bitwidth with float16 data is not supported");
      b64 = qonnx::int_quant_bounds_f64(signed_, narrow_, *b.as<double>());
      bounds = qonnx::narrow_to_f32(b64);
    } else if (b.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
      b64 = qonnx::int_quant_bounds_i64(signed_, narrow_, *b.as<int64_t>());
      bounds = qonnx::narrow_to_f32(b64);
    } else {
      throw_error("input bitwidth must be float32, int32, float16, float64 or int64, got ", dtype_name(b.dtype));
    }
    const Shape out = broadcast_shapes({x.shape, s.shape, z.shape, b.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, s.shape, z.shape});
    float* y;
    if (ctx) {
      y = ctx->output_as<float>(0, out);
    } else {
      folded->dtype = kFloat;
      folded->shape = out;
      folded->bytes.resize(static_cast<size_t>(plan.total) * sizeof(float));
      y = reinterpret_cast<float*>(folded->bytes.data());
    }
    auto body = [&](int64_t b0, int64_t e0) {
      if (wide) {
        qonnx::int_quant_wide(plan, {x.data, x.dtype == kDouble}, {s.data, s.dtype == kDouble},
                              {z.data, z.dtype == kDouble}, y, b0, e0, b64, mode_);
      } else if (!x16 && !s16 && !z16) {
        qonnx::int_quant(plan, x.as<float>(), s.as<float>(), z.as<float>(), y, b0, e0, bounds, mode_);
      } else {
        qonnx::int_quant_mixed(plan, {x.data, x16}, {s.data, s16}, {z.data, z16}, y, b0, e0, bounds, mode_);
      }
    };
    if (ctx) ctx->parallel_range(plan.total, kElementwiseGrain, body);
    else body(0, plan.total);
  }

  ParamInput x_, scale_, zeropt_, bitwidth_;
  std::optional<OwnedTensor> scale_promoted_, zeropt_promoted_;
  bool signed_ = true, narrow_ = false;
  RoundMode mode_ = RoundMode::kHalfEven;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> quant_specs(const std::string& name) {
  std::vector<OpSpec> specs;
  // scale and zeropt take any type (float16/32/64 or an integer type, promoted and checked by the kernel), so the
  // forms differ in X only.
  for (ONNXTensorElementDataType x : {kFloat, kFloat16, kDouble}) {
    OpSpec s;
    s.name = name;
    s.inputs = {req(x), req(kAny), req(kAny), req(kAny)};
    s.outputs = {req(kFloat)};
    s.factory = [](const KernelInfo& info) { return std::make_unique<QuantKernel>(info); };
    specs.push_back(std::move(s));
  }
  return specs;
}

}  // namespace ortquant::ort
