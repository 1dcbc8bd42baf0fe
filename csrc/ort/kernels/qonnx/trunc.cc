// QONNX Trunc / TruncQuant adapter (decision 6): one op with 6 inputs, the last optional; 5 inputs run v1,
// 6 run v2. Constant parameter inputs are expanded once at creation; a node on constant inputs is computed once.
// dtypes (three OpSpecs): X, scale, zeropt float32 -> float32; X float16 with float32 scale and zeropt -> float32
// (numpy promotes to float32 at X / scale); X, scale, zeropt and input 4 (v1 out_bitwidth, v2 out_scale) float16
// -> float16 (see core/qonnx/trunc.h for the other inputs). Any float64 or int64 input (X, scale, zeropt each
// float32/float64; bit widths and out_scale float32/float64/int32/int64) runs the float64 path of
// core/qonnx/wide_params.h (float32 output).
#include "core/qonnx/trunc.h"
#include "core/qonnx/wide_params.h"

#include "ort/kernels/qonnx/elementwise.h"
#include "ort/kernels/qonnx/qonnx_ops.h"

namespace ortquant::ort {
namespace {

using namespace qonnx_elementwise;

class TruncKernel : public OpKernel {
 public:
  explicit TruncKernel(const KernelInfo& info)
      : x_(info, 0), scale_(info, 1), zeropt_(info, 2), in_bw_(info, 3), in4_(info, 4), out_bw_(info, 5) {
    v2_ = out_bw_.present();
    const std::string mode = info.attr_string("rounding_mode", "FLOOR");
    if (!parse_qonnx_round_mode(mode, &mode_)) throw_error("attribute 'rounding_mode': unknown rounding mode '", mode, "'");
    // signed/narrow belong to v2; they are validated for v1 too and ignored there (as qonnx does).
    signed_ = info.attr_bool("signed", true);
    narrow_ = info.attr_bool("narrow", false);
    if (params_constant() && !any_wide_constant()) {
      params_ = make_params(*scale_.constant(), *zeropt_.constant(), v2_ ? TensorView() : *in_bw_.constant(),
                            *in4_.constant(), v2_ ? *out_bw_.constant() : TensorView());
      if (x_.is_constant() && !is_wide(*x_.constant())) {
        folded_ = OwnedTensor();
        run(*x_.constant(), *params_, nullptr, &*folded_);
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    const TensorView x = x_.get(ctx);
    if (params_) {
      if (is_wide(x)) return run_wide(ctx, x);
      return run(x, *params_, &ctx, nullptr);
    }
    if (is_wide(x) || is_wide(scale_.get(ctx)) || is_wide(zeropt_.get(ctx)) || is_wide(in4_.get(ctx)) ||
        (v2_ ? is_wide(out_bw_.get(ctx)) : is_wide(in_bw_.get(ctx))))
      return run_wide(ctx, x);
    const qonnx::TruncParams p = make_params(scale_.get(ctx), zeropt_.get(ctx), v2_ ? TensorView() : in_bw_.get(ctx),
                                             in4_.get(ctx), v2_ ? out_bw_.get(ctx) : TensorView());
    run(x, p, &ctx, nullptr);
  }

 private:
  bool params_constant() const {
    return scale_.is_constant() && zeropt_.is_constant() && in4_.is_constant() &&
           (v2_ ? out_bw_.is_constant() : in_bw_.is_constant());
  }

  // v1: (scale, zeropt, in_bitwidth, out_bitwidth); v2: (scale, zeropt, -, out_scale, out_bitwidth).
  qonnx::TruncParams make_params(const TensorView& s, const TensorView& z, const TensorView& in_bw,
                                 const TensorView& in4, const TensorView& out_bw) const {
    const auto sn = num_tensor(s, false, "scale", true);
    const auto zn = num_tensor(z, false, "zeropt", true);
    if (!v2_) {
      return qonnx::trunc_v1_params(sn, zn, num_tensor(in_bw, true, "in_bitwidth", true),
                                    num_tensor(in4, true, "out_bitwidth", true));
    }
    return qonnx::trunc_v2_params(sn, zn, num_tensor(in4, false, "out_scale", true),
                                  num_tensor(out_bw, true, "out_bitwidth", true), signed_, narrow_);
  }

  void run(const TensorView& x, const qonnx::TruncParams& p, KernelContext* ctx, OwnedTensor* folded) const {
    const bool x16 = is_float16(x, "input X");
    const Shape out = broadcast_shapes({x.shape, p.shape});
    const BroadcastPlan plan = make_broadcast_plan(out, {x.shape, p.shape});
    void* y = output_buffer(ctx, folded, out, p.half);
    run_range(ctx, plan.total, [&](int64_t b, int64_t e) { qonnx::trunc(plan, x.data, x16, p, y, b, e, mode_); });
  }

  static bool is_wide(const TensorView& t) {
    return t.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE || t.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  }
  bool any_wide_constant() const {
    for (const ParamInput* p : {&scale_, &zeropt_, &in4_, v2_ ? &out_bw_ : &in_bw_})
      if (p->is_constant() && is_wide(*p->constant())) return true;
    return false;
  }

  // A view as the float64 path's tensor; `allow_int` for bit widths (int32/int64), float16 is refused.
  static qonnx::WideTensor wide(const TensorView& t, bool allow_int, const char* what) {
    using K = qonnx::WideTensor;
    switch (t.dtype) {
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return {t.data, K::kF32, t.shape};
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return {t.data, K::kF64, t.shape};
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
        if (allow_int) return {t.data, K::kI32, t.shape};
        break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
        if (allow_int) return {t.data, K::kI64, t.shape};
        break;
      default: break;
    }
    throw_error("input ", what, " must be float32 or float64", allow_int ? ", int32 or int64" : "",
                " when another input is float64 or int64, got ", dtype_name(t.dtype));
  }

  void run_wide(KernelContext& ctx, const TensorView& xv) const {
    const TensorView sv = scale_.get(ctx), zv = zeropt_.get(ctx), i4 = in4_.get(ctx);
    const qonnx::WideTensor x = wide(xv, false, "X"), s = wide(sv, false, "scale"), z = wide(zv, false, "zeropt");
    const qonnx::WideTensor four = wide(i4, true, v2_ ? "out_scale" : "out_bitwidth");
    std::vector<Shape> shapes = {xv.shape, sv.shape, zv.shape, i4.shape};
    qonnx::WideTensor in_bw, out_bw;
    if (v2_) {
      if (!in4_.present()) throw_error("input out_scale is missing");
      const TensorView ob = out_bw_.get(ctx);
      if (four.is_int()) throw_error("input out_scale must be float32 or float64, got ", dtype_name(i4.dtype));
      out_bw = wide(ob, true, "out_bitwidth");
      in_bw = {four.data, four.kind, Shape{}};  // not read by v2 (a one-element placeholder shape)
      shapes.push_back(ob.shape);
    } else {
      const TensorView ib = in_bw_.get(ctx);
      in_bw = wide(ib, true, "in_bitwidth");
      shapes.push_back(ib.shape);
    }
    const Shape out = broadcast_shapes(shapes);
    float* y = ctx.output_as<float>(0, out);
    qonnx::trunc_wide(x, s, z, in_bw, four, v2_ ? &out_bw : nullptr, signed_, narrow_, mode_, out, y);
  }

  ParamInput x_, scale_, zeropt_, in_bw_, in4_, out_bw_;
  bool v2_ = false;
  bool signed_ = true, narrow_ = false;
  RoundMode mode_ = RoundMode::kFloor;
  std::optional<qonnx::TruncParams> params_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

std::vector<OpSpec> trunc_specs(const std::string& name) {
  std::vector<OpSpec> specs;
  auto add = [&](ONNXTensorElementDataType x, ONNXTensorElementDataType params, ONNXTensorElementDataType in4,
                 ONNXTensorElementDataType y) {
    OpSpec s;
    s.name = name;
    // X, scale, zeropt, in_bitwidth, out_bitwidth (v1) | out_scale (v2), out_bitwidth (v2 only)
    s.inputs = {req(x), req(params), req(params), req(kAny), req(in4), opt(kAny)};
    s.outputs = {req(y)};
    s.factory = [](const KernelInfo& info) { return std::make_unique<TruncKernel>(info); };
    specs.push_back(std::move(s));
  };
  add(kFloat, kFloat, kAny, kFloat);
  add(kFloat16, kFloat, kAny, kFloat);
  add(kFloat16, kFloat16, kFloat16, kFloat16);
  // float64 X / scale / zeropt (float64 bit widths or out_scale alone go through the first form).
  for (int combo = 1; combo < 8; ++combo) {
    auto t = [&](int bit) { return combo & (1 << bit) ? kDouble : kFloat; };
    OpSpec s;
    s.name = name;
    s.inputs = {req(t(0)), req(t(1)), req(t(2)), req(kAny), req(kAny), opt(kAny)};
    s.outputs = {req(kFloat)};
    s.factory = [](const KernelInfo& info) { return std::make_unique<TruncKernel>(info); };
    specs.push_back(std::move(s));
  }
  return specs;
}

}  // namespace ortquant::ort
