// BmmInt (thinker / onnxinfer): o = requant(x @ y), x int8 [..., N, M], y int8 [..., M, P] with the same leading
// (batch) dims, output [..., N, P] (linger.md section 3; attributes scale_x, scale_y, [scale_o, o_bits]).
// Both operands are activations: y is packed per call (once at creation when it is a constant initializer).
#include <vector>

#include "core/gemm/gemm.h"
#include "ort/kernels/linger/linger_matrix_ops.h"
#include "ort/kernels/linger/matrix_common.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

using namespace matrix;

// A batch is computed by one task (instead of spreading each batch over the pool) below this many MACs.
constexpr int64_t kSmallBatchWork = int64_t{1} << 22;

struct BmmShape {
  int64_t batches = 1, n = 0, m = 0, p = 0;
  Shape out;
};

BmmShape bmm_shape(const Shape& x, const Shape& y) {
  if (x.size() < 2 || y.size() != x.size())
    throw_error("inputs must have the same rank >= 2 ([..., N, M] and [..., M, P]), got ", shape_str(x), " and ",
                shape_str(y));
  BmmShape s;
  const size_t r = x.size();
  for (size_t i = 0; i + 2 < r; ++i) {
    if (x[i] != y[i]) throw_error("batch dims differ: ", shape_str(x), " vs ", shape_str(y));
    s.batches *= x[i];
  }
  s.n = x[r - 2];
  s.m = x[r - 1];
  s.p = y[r - 1];
  if (y[r - 2] != s.m) throw_error("inner dims differ: x ", shape_str(x), " has M = ", s.m, ", y ", shape_str(y), " has ", y[r - 2]);
  s.out = x;
  s.out[r - 1] = s.p;
  return s;
}

std::vector<gemm::PackedWeights> pack_y(const TensorView& y, const BmmShape& s, const gemm::Parallel& par) {
  std::vector<gemm::PackedWeights> packed(static_cast<size_t>(s.batches));
  const int8_t* base = y.as<int8_t>();
  // Packing allocates, so it runs here and not inside pool tasks (which must not throw) when there is one batch.
  if (s.batches == 1) {
    packed[0] = gemm::pack_weights_kmajor(base, s.m, s.p, s.p);
    return packed;
  }
  for (int64_t b = 0; b < s.batches; ++b) packed[static_cast<size_t>(b)] = gemm::PackedWeights();
  std::vector<char> failed(static_cast<size_t>(s.batches), 0);
  par(static_cast<size_t>(s.batches), [&](size_t b) {
    try {
      packed[b] = gemm::pack_weights_kmajor(base + static_cast<int64_t>(b) * s.m * s.p, s.m, s.p, s.p);
    } catch (...) {
      failed[b] = 1;
    }
  });
  for (char f : failed)
    if (f) throw_error("out of memory packing y");
  return packed;
}

class BmmIntKernel : public OpKernel {
 public:
  explicit BmmIntKernel(const KernelInfo& info) : y_(info, 1) {
    out_ = output_spec(info, "scale_x", "scale_y");
    check_dtype(info.input_dtype(0), kI8, "input x");
    check_dtype(info.input_dtype(1), kI8, "input y");
    if (y_.is_constant()) {
      const TensorView y = *y_.constant();
      check_dtype(y.dtype, kI8, "input y");
      if (y.shape.size() < 2) throw_error("input y must have rank >= 2 [..., M, P], got ", shape_str(y.shape));
      BmmShape ys;
      for (size_t i = 0; i + 2 < y.shape.size(); ++i) ys.batches *= y.shape[i];
      ys.m = y.shape[y.shape.size() - 2];
      ys.p = y.shape.back();
      y_packed_ = pack_y(y, ys, &gemm::run_inline);
    }
  }

  void compute(KernelContext& ctx) const override {
    const TensorView x = ctx.required_input(0);
    const TensorView y = y_.get(ctx);
    check_dtype(x.dtype, kI8, "input x");
    check_dtype(y.dtype, kI8, "input y");
    const BmmShape s = bmm_shape(x.shape, y.shape);
    void* out = ctx.output(0, s.out);
    if (s.batches == 0 || s.n == 0 || s.p == 0) return;
    const gemm::Parallel par = parallel(ctx);
    std::vector<gemm::PackedWeights> local;
    if (!y_packed_) local = pack_y(y, s, par);
    const std::vector<gemm::PackedWeights>& packed = y_packed_ ? *y_packed_ : local;
    const int64_t es = static_cast<int64_t>(gemm::out_elem_size(out_.ep.kind));
    const int8_t* xb = x.as<int8_t>();
    auto one = [&](int64_t b, const gemm::Parallel& inner) {
      gemm::gemm_rows(xb + b * s.n * s.m, s.n, s.m, packed[static_cast<size_t>(b)], out_.ep,
                      static_cast<char*>(out) + b * s.n * s.p * es, s.p, inner);
    };
    if (s.batches > 1 && s.n * s.m * s.p < kSmallBatchWork) {
      // Small matrices: one batch per task. gemm_rows allocates its activation tiles; a failure there is
      // reported after the loop (pool tasks must not throw).
      std::vector<char> failed(static_cast<size_t>(s.batches), 0);
      par(static_cast<size_t>(s.batches), [&](size_t b) {
        try {
          one(static_cast<int64_t>(b), &gemm::run_inline);
        } catch (...) {
          failed[b] = 1;
        }
      });
      for (char f : failed)
        if (f) throw_error("out of memory");
      return;
    }
    for (int64_t b = 0; b < s.batches; ++b) one(b, par);
  }

 private:
  ParamInput y_;
  OutputSpec out_;
  std::optional<std::vector<gemm::PackedWeights>> y_packed_;  // y constant: packed per batch at creation
};

// [..., N, P] from x [..., N, M] and y [..., M, P].
void infer(const InferContext& ctx) {
  InferContext::Dims x, y;
  if (!ctx.input_shape(0, &x) || x.rank() < 2) return;
  const bool have_y = ctx.input_shape(1, &y) && y.rank() == x.rank();
  x.dims.back() = have_y ? y.dims.back() : -1;
  x.sym.back() = have_y ? y.sym.back() : InferContext::fresh_dim();
  ctx.set_output(0, infer_out_dtype(ctx), x);
}

OpSpec spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kAny), req(kAny)};
  s.outputs = {req(kI8)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<BmmIntKernel>(info); };
  s.infer = &infer;
  return s;
}

}  // namespace

OpSpec bmm_int_spec(const std::string& name) { return spec(name); }
OpSpec bmm_int_spec_i16(const std::string& name) { return with_output0<kI16>(spec(name)); }
OpSpec bmm_int_spec_i32(const std::string& name) { return with_output0<kI32>(spec(name)); }
OpSpec bmm_int_spec_f32(const std::string& name) { return with_output0<kFloat>(spec(name)); }

}  // namespace ortquant::ort
