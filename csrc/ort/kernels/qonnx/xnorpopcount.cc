// QONNX XnorPopcountMatMul adapter: B (K, N) is bit-packed once at creation when it is an initializer; A is
// packed per run in the parallel tasks that use it. Values other than 0 and 1 are an error naming the input.
#include "core/qonnx/xnorpopcount.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "ort/kernels/qonnx/output_sink.h"
#include "ort/kernels/qonnx/qonnx_ops.h"
#include "ort/params.h"

namespace ortquant::ort {
namespace {

qonnx::BitRows pack_b(const TensorView& b) {
  expect_dtype(b, kFloat, "input B");
  if (b.shape.size() != 2) throw_error("input B must be 2-D (K, N), got shape ", shape_str(b.shape));
  return qonnx::pack_bit_columns(b.as<float>(), b.shape[0], b.shape[1], "input B");
}

class XnorPopcountKernel : public OpKernel {
 public:
  explicit XnorPopcountKernel(const KernelInfo& info) : a_(info, 0), b_(info, 1) {
    if (b_.is_constant()) b_bits_ = pack_b(*b_.constant());
    if (a_.is_constant() && b_bits_) {
      folded_ = OwnedTensor();
      run(*a_.constant(), *b_bits_, OutputSink(*folded_));
    }
  }

  void compute(KernelContext& ctx) const override {
    if (folded_) return emit_folded(ctx, *folded_);
    const TensorView a = a_.get(ctx);
    if (b_bits_) return run(a, *b_bits_, OutputSink(ctx));
    run(a, pack_b(b_.get(ctx)), OutputSink(ctx));
  }

 private:
  void run(const TensorView& a, const qonnx::BitRows& b, const OutputSink& out) const {
    expect_dtype(a, kFloat, "input A");
    if (a.shape.empty()) throw_error("input A must have at least one dimension (..., K)");
    const int64_t k = a.shape.back();
    if (k != b.bits)
      throw_error("input A has shape ", shape_str(a.shape), " but B has ", b.bits, " rows: the last dimension of A must",
                  " equal the first of B");
    Shape shape(a.shape.begin(), a.shape.end() - 1);
    const int64_t m = shape_size(shape);  // rows of A
    shape.push_back(b.rows);
    float* y = out.alloc_f32(shape);
    if (m == 0 || b.rows == 0) {
      // Nothing to compute, but A must still be binary.
      qonnx::check_binary(a.as<float>(), m, k, "input A");
      return;
    }
    std::vector<uint64_t> a_bits(static_cast<size_t>(m * b.words));
    std::atomic<bool> ok{true};
    const float* ap = a.as<float>();
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (b.rows * b.words + k + 1));
    out.parallel_range(m, grain, [&](int64_t r0, int64_t r1) {
      if (!qonnx::pack_bit_rows(ap, k, r0, r1, a_bits.data())) {
        ok = false;
        return;
      }
      qonnx::xnor_popcount(a_bits.data(), b, r0, r1, y);
    });
    if (!ok) qonnx::check_binary(ap, m, k, "input A");
  }

  ParamInput a_, b_;
  std::optional<qonnx::BitRows> b_bits_;
  std::optional<OwnedTensor> folded_;
};

}  // namespace

OpSpec xnorpopcount_spec(const std::string& name) {
  OpSpec s;
  s.name = name;
  s.inputs = {req(kFloat), req(kFloat)};
  s.outputs = {req(kFloat)};
  s.factory = [](const KernelInfo& info) { return std::make_unique<XnorPopcountKernel>(info); };
  return s;
}

}  // namespace ortquant::ort
