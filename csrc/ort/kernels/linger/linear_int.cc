// LinearInt (thinker / onnxinfer): y = requant(x . W^T + b), x int8 [..., K], W int8 [N, K] (torch layout,
// linger.md section 3), b int32 [N]. A constant W is packed once at kernel creation.
#include "core/gemm/gemm.h"
#include "ort/kernels/linger/linger_matrix_ops.h"
#include "ort/kernels/linger/matrix_common.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace matrix;

gemm::PackedWeights pack_linear_weight(const TensorView& w) {
  check_dtype(w.dtype, kI8, "input weight");
  if (w.shape.size() != 2) throw_error("input weight must be 2-D [N, K], got shape ", shape_str(w.shape));
  return gemm::pack_weights(w.as<int8_t>(), w.shape[0], w.shape[1], w.shape[1],
                            gemm::PackedWeights::Layout::kPanels);
}

class LinearIntKernel : public OpKernel {
 public:
  explicit LinearIntKernel(const KernelInfo& info) : w_(info, 1), b_(info, 2) {
    out_ = output_spec(info, "scale_x", "scale_w");
    check_dtype(info.input_dtype(0), kI8, "input x");
    check_dtype(info.input_dtype(1), kI8, "input weight");
    if (b_.present()) check_dtype(info.input_dtype(2), kI32, "input bias");
    if (w_.is_constant()) packed_ = pack_linear_weight(*w_.constant());
    if (packed_ && b_.is_constant()) bias_data(b_.constant(), packed_->n);
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    check_dtype(x.dtype, kI8, "input x");
    if (x.shape.empty()) throw_error("input x must have at least 1 dimension");
    std::optional<gemm::PackedWeights> local;
    if (!packed_) local = pack_linear_weight(w_.get(ctx));
    const gemm::PackedWeights& w = packed_ ? *packed_ : *local;
    const int64_t k = x.shape.back();
    if (k != w.k) throw_error("input x has ", k, " features (last dim) but the weight [N, K] has K = ", w.k);
    gemm::Epilogue ep = out_.ep;
    ep.bias = bias_data(b_.get_optional(ctx), w.n);
    Shape ys = x.shape;
    ys.back() = w.n;
    void* y = ctx.output(0, ys);
    int64_t m = 1;
    for (size_t i = 0; i + 1 < x.shape.size(); ++i) m *= x.shape[i];
    gemm::gemm_rows(x.as<int8_t>(), m, k, w, ep, y, w.n, parallel(ctx));
  }

 private:
  ParamInput w_, b_;
  OutputSpec out_;
  std::optional<gemm::PackedWeights> packed_;
};

// y [..., N]: x's shape with the last dim replaced by W's first.
void infer(const InferContext& ctx) {
  InferContext::Dims x, w;
  if (!ctx.input_shape(0, &x)) return;
  const bool have_w = ctx.input_shape(1, &w) && w.rank() == 2;
  x.dims.back() = have_w ? w.dims[0] : -1;
  x.sym.back() = have_w ? w.sym[0] : InferContext::fresh_dim();
  ctx.set_output(0, infer_out_dtype(ctx), x);
}

OpSpec spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kAny), opt(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<LinearIntKernel>(info); };
  s.infer = &infer;
  return s;
}

}  // namespace

OpSpec linear_int_spec(const std::string& name) { return spec(name); }
OpSpec linear_int_spec_i16(const std::string& name) { return with_output0<kI16>(spec(name)); }
OpSpec linear_int_spec_i32(const std::string& name) { return with_output0<kI32>(spec(name)); }
OpSpec linear_int_spec_f32(const std::string& name) { return with_output0<kFloat>(spec(name)); }

}  // namespace ortquant::ort
