// Where a kernel writes its single output: onnxruntime's output 0 during a run, or a tensor the kernel keeps
// when every input is a constant initializer and the node is computed once at creation (decision 18).
// Used by the structural QONNX kernels (MultiThreshold, XnorPopcountMatMul, Im2Col, pooling, DebugMarker).
#pragma once
#include <cstring>
#include <functional>

#include "ort/op.h"

namespace ortquant::ort {

class OutputSink {
 public:
  explicit OutputSink(const KernelContext& ctx) : ctx_(&ctx) {}
  explicit OutputSink(OwnedTensor& folded) : folded_(&folded) {}

  // Allocates output 0 (float32) with `shape` and returns its data.
  float* alloc_f32(const Shape& shape) const {
    if (ctx_ != nullptr) return ctx_->output_as<float>(0, shape);
    folded_->dtype = kFloat;
    folded_->shape = shape;
    folded_->bytes.assign(static_cast<size_t>(checked_bytes(shape_size(shape), sizeof(float), "output 0 (computed at creation)")), 0);
    return reinterpret_cast<float*>(folded_->bytes.data());
  }

  // Runs fn over [0, total) on onnxruntime's pool during a run, inline when folding at creation.
  void parallel_range(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
    if (ctx_ != nullptr) ctx_->parallel_range(total, grain, fn);
    else if (total > 0) fn(0, total);
  }

 private:
  const KernelContext* ctx_ = nullptr;
  OwnedTensor* folded_ = nullptr;
};

// Copies a tensor computed at creation to output 0.
inline void emit_folded(const KernelContext& ctx, const OwnedTensor& t) {
  void* y = ctx.output(0, t.shape);
  if (!t.bytes.empty()) std::memcpy(y, t.bytes.data(), t.bytes.size());
}

}  // namespace ortquant::ort
