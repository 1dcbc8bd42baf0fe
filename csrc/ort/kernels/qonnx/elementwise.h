// Helpers shared by the adapters of the QONNX elementwise ops (Quant, BipolarQuant, Trunc, FloatQuant).
#pragma once
#include <cstring>
#include <optional>

#include "core/qonnx/params.h"
#include "ort/op.h"
#include "ort/params.h"

namespace ortquant::ort::qonnx_elementwise {

constexpr ONNXTensorElementDataType kFloat16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
constexpr ONNXTensorElementDataType kDouble = ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;

// A float32 or float64 operand of the float64-parameter paths (core/qonnx/wide_params.h); throws naming `what`
// for anything else (float16 does not mix with float64).
inline void expect_wide(const TensorView& t, const char* what) {
  if (t.dtype != kFloat && t.dtype != kDouble)
    throw_error(what, " must be float32 or float64 when another input is float64, got ", dtype_name(t.dtype));
}

// True for a float16 tensor, false for a float32 one; throws naming `what` for anything else.
inline bool is_float16(const TensorView& t, const char* what) {
  if (t.dtype == kFloat16) return true;
  if (t.dtype != kFloat) throw_error(what, " must be float32 or float16, got ", dtype_name(t.dtype));
  return false;
}

// A float32 input (or int32 when allow_int: bit widths; float16 when allow_f16) as the core's NumTensor; throws
// naming `what` otherwise.
inline qonnx::NumTensor num_tensor(const TensorView& t, bool allow_int, const char* what, bool allow_f16 = false) {
  if (t.dtype == kFloat) return {t.data, false, t.shape};
  if (allow_int && t.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) return {t.data, true, t.shape};
  if (allow_f16 && t.dtype == kFloat16) return {t.data, false, t.shape, true};
  throw_error("input ", what, " must be float32", allow_int ? (allow_f16 ? ", int32 or float16" : " or int32")
                                                             : (allow_f16 ? " or float16" : ""),
              ", got ", dtype_name(t.dtype));
}

// The output buffer (float32 or float16 elements): ctx's output 0 with shape `out`, or `folded` (filled at kernel
// creation) when ctx is null.
inline void* output_buffer(KernelContext* ctx, OwnedTensor* folded, const Shape& out, bool f16) {
  if (ctx) return ctx->output(0, out);
  folded->dtype = f16 ? kFloat16 : kFloat;
  folded->shape = out;
  folded->bytes.resize(static_cast<size_t>(shape_size(out)) * (f16 ? 2 : sizeof(float)));
  return folded->bytes.data();
}
inline float* output_buffer(KernelContext* ctx, OwnedTensor* folded, const Shape& out) {
  return static_cast<float*>(output_buffer(ctx, folded, out, false));
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
