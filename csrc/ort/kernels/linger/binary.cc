// thinker iqAdd / iqMul / iqDiv adapters (core: core/linger/iqadd.h, iqmul.h, iqdiv.h).
// Second input: an int8 tensor (numpy broadcasting), or a float32 tensor (linger writes a 0-d float Constant for
// x + 3.0 and x / 3.0). A one-element constant second input is folded into a 256-entry table over x at creation;
// all-constant inputs are computed once at creation (decision 18).
#include <cstring>

#include "core/linger/iqadd.h"
#include "core/linger/iqdiv.h"
#include "core/linger/iqmul.h"
#include "ort/kernels/linger/linger_common.h"
#include "ort/kernels/linger/linger_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace lingerk;
using linger::BinaryI8;
using linger::UnaryI8;

enum class BinOp { kAdd, kMul, kDiv };

class BinaryKernel : public OpKernel {
 public:
  BinaryKernel(const KernelInfo& info, BinOp op) : op_(op), x_(info, 0), y_(info, 1) {
    check_platform_quant(info);
    sx_ = scale_attr(info, "scale_x");
    sy_ = scale_attr(info, "scale_y");
    so_ = scale_attr(info, "scale_o");
    if (op == BinOp::kAdd) {
      const std::string mode = info.attr_string("mode", "Non_t710_mode");
      if (mode != "Non_t710_mode")
        throw_error("unsupported mode '", mode, "' (ortquant implements linger's luna arithmetic, Non_t710_mode)");
    }
    switch (op) {
      case BinOp::kAdd: int_ = linger::make_iqadd(sx_, sy_, so_); break;
      case BinOp::kMul: int_ = linger::make_iqmul(sx_, sy_, so_); break;
      case BinOp::kDiv: int_ = linger::make_iqdiv(sx_, sy_, so_); break;
    }
    if (auto y = y_.constant()) {
      if (y->size() == 1) unary_ = make_unary(*y);
      if (auto x = x_.constant()) {
        fold_ = OwnedTensor();
        run(*x, *y, nullptr, &*fold_);
      }
    }
  }

  void compute(KernelContext& ctx) const override {
    if (fold_) {
      int8_t* z = ctx.output_as<int8_t>(0, fold_->shape);
      if (!fold_->bytes.empty()) std::memcpy(z, fold_->bytes.data(), fold_->bytes.size());
      return;
    }
    run(x_.get(ctx), y_.get(ctx), &ctx, nullptr);
  }

 private:
  // The map x -> op(x, y) for a one-element y.
  std::optional<UnaryI8> make_unary(const TensorView& y) const {
    if (y.dtype == kI8) {
      const int8_t c = *y.as<int8_t>();
      const BinaryI8& f = int_;
      return UnaryI8::from_fn([&f, c](int8_t x) { return f(x, c); });
    }
    if (y.dtype == kFloat) {
      const float c = *y.as<float>();
      switch (op_) {
        case BinOp::kAdd: return linger::make_iqadd_const(sx_, sy_, so_, c);
        case BinOp::kMul: return linger::make_iqmul_const_float(sx_, sy_, so_, c);
        case BinOp::kDiv: return linger::make_iqdiv_const(sx_, sy_, so_, c);
      }
    }
    return std::nullopt;  // a wrong dtype is reported by run()
  }

  int8_t float_op(int8_t x, float y) const {
    switch (op_) {
      case BinOp::kAdd: return linger::iqadd_float(x, y, sx_, sy_, so_);
      case BinOp::kMul: return linger::iqmul_float(x, y, sx_, sy_, so_);
      case BinOp::kDiv: return linger::iqdiv_float(x, y / sy_, sx_, so_);
    }
    return 0;
  }

  void run(const TensorView& x, const TensorView& y, KernelContext* ctx, OwnedTensor* fold) const {
    expect_dtype(x, kI8, "input x");
    if (y.dtype != kI8 && y.dtype != kFloat)
      throw_error("input y must be int8 or float32, got ", dtype_name(y.dtype));
    const Shape out = broadcast_shapes({x.shape, y.shape});
    const int64_t total = shape_size(out);
    int8_t* z;
    if (ctx) {
      z = ctx->output_as<int8_t>(0, out);
    } else {
      fold->dtype = kI8;
      fold->shape = out;
      fold->bytes.resize(static_cast<size_t>(total));
      z = reinterpret_cast<int8_t*>(fold->bytes.data());
    }
    const int8_t* xp = x.as<int8_t>();
    std::function<void(int64_t, int64_t)> body;
    BroadcastPlan plan;
    if (unary_ && y.size() == 1 && total == x.size()) {
      body = [&](int64_t b, int64_t e) { unary_->run(xp + b, z + b, e - b); };
    } else {
      plan = make_broadcast_plan(out, {x.shape, y.shape});
      if (y.dtype == kI8) {
        const int8_t* yp = y.as<int8_t>();
        body = [&, yp](int64_t b, int64_t e) { int_.run(plan, xp, yp, z, b, e); };
      } else {
        const float* yp = y.as<float>();
        body = [&, yp](int64_t b, int64_t e) {
          for_each_segment(plan, b, e, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
            for (int64_t i = 0; i < n; ++i) z[o + i] = float_op(xp[offs[0] + i * st[0]], yp[offs[1] + i * st[1]]);
          });
        };
      }
    }
    if (ctx) ctx->parallel_range(total, kElementwiseGrain, body);
    else body(0, total);
  }

  BinOp op_;
  ParamInput x_, y_;
  float sx_ = 1.f, sy_ = 1.f, so_ = 1.f;
  BinaryI8 int_;
  std::optional<UnaryI8> unary_;
  std::optional<OwnedTensor> fold_;
};

OpSpec binary_spec(const std::string& name, BinOp op) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kI8), req(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [op](const KernelInfo& info) { return std::make_unique<BinaryKernel>(info, op); };
  s.infer = &infer_broadcast_i8;
  return s;
}

}  // namespace

OpSpec linger_iqadd_spec(const std::string& name) { return binary_spec(name, BinOp::kAdd); }
OpSpec linger_iqmul_spec(const std::string& name) { return binary_spec(name, BinOp::kMul); }
OpSpec linger_iqdiv_spec(const std::string& name) { return binary_spec(name, BinOp::kDiv); }

}  // namespace ortquant::ort
