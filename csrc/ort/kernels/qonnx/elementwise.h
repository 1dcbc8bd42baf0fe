// Helpers shared by the adapters of the QONNX elementwise ops (Quant, BipolarQuant, Trunc, FloatQuant).
#pragma once
#include <cstring>
#include <optional>
#include <type_traits>

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

// An integer zero point as numpy promotes it against qonnx's float data (NEP 50; qonnx computes `x / scale +
// zeropt` on numpy arrays): int8, uint8, int16 and uint16 are exact in float32 and keep a float32 computation
// float32, so they become float32; int32, uint32, int64 and uint64 promote float32 to float64, so they become
// float64 (the value rounded as numpy's cast rounds it) and the op takes its float64 path. Float tensors are
// returned as they are; `storage` receives converted data. Throws naming `what` for other types.
inline TensorView promote_int_param(const TensorView& t, OwnedTensor& storage, const char* what) {
  auto convert = [&](auto tag, auto to) {
    using From = decltype(tag);
    using To = decltype(to);
    storage.dtype = std::is_same_v<To, float> ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : kDouble;
    storage.shape = t.shape;
    const int64_t n = t.size();
    storage.bytes.resize(static_cast<size_t>(n) * sizeof(To));
    const From* src = t.as<From>();
    To* dst = reinterpret_cast<To*>(storage.bytes.data());
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
    return storage.view();
  };
  switch (t.dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return convert(int8_t{}, float{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return convert(uint8_t{}, float{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return convert(int16_t{}, float{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return convert(uint16_t{}, float{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return convert(int32_t{}, double{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return convert(uint32_t{}, double{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return convert(int64_t{}, double{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return convert(uint64_t{}, double{});
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return t;
    default:
      throw_error("input ", what, " must be float16, float32, float64 or an integer type, got ", dtype_name(t.dtype));
  }
}

inline bool is_int_type(ONNXTensorElementDataType d) {
  switch (d) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return true;
    default: return false;
  }
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
