// Helpers shared by the adapters of the QONNX elementwise ops (BipolarQuant, Trunc, FloatQuant).
#pragma once
#include <cstring>
#include <optional>

#include "core/qonnx/params.h"
#include "ort/op.h"
#include "ort/params.h"

namespace ortquant::ort::qonnx_elementwise {

// A float32 input (or int32 when allow_int: bit widths) as the core's NumTensor; throws naming `what`.
inline qonnx::NumTensor num_tensor(const TensorView& t, bool allow_int, const char* what) {
  if (t.dtype == kFloat) return {t.data, false, t.shape};
  if (allow_int && t.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) return {t.data, true, t.shape};
  throw_error("input ", what, " must be float32", allow_int ? " or int32" : "", ", got ", dtype_name(t.dtype));
}

// The output buffer: ctx's output 0 with shape `out`, or `folded` (filled at kernel creation) when ctx is null.
inline float* output_buffer(KernelContext* ctx, OwnedTensor* folded, const Shape& out) {
  if (ctx) return ctx->output_as<float>(0, out);
  folded->dtype = kFloat;
  folded->shape = out;
  folded->bytes.resize(static_cast<size_t>(shape_size(out)) * sizeof(float));
  return reinterpret_cast<float*>(folded->bytes.data());
}

// Runs body(begin, end) over [0, total): on onnxruntime's pool with a context, inline otherwise.
template <class Body>
void run_range(KernelContext* ctx, int64_t total, Body&& body) {
  if (ctx) ctx->parallel_range(total, kElementwiseGrain, body);
  else body(int64_t{0}, total);
}

// Copies a result computed at creation into output 0.
inline void emit_folded(KernelContext& ctx, const OwnedTensor& folded) {
  void* y = ctx.output(0, folded.shape);
  if (!folded.bytes.empty()) std::memcpy(y, folded.bytes.data(), folded.bytes.size());
}

}  // namespace ortquant::ort::qonnx_elementwise
