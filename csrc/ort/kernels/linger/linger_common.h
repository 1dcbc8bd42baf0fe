// Helpers shared by the linger / thinker adapters: attribute validation (scales, bit widths, platform_quant),
// integer output types chosen by a bit-width attribute, and element access by dtype.
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort::lingerk {

constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
constexpr ONNXTensorElementDataType kI16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
constexpr ONNXTensorElementDataType kI32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
constexpr ONNXTensorElementDataType kI64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;

// platform_quant: absent or "luna_quant" (the only platform linger 1.1.1 implements); anything else is an error.
void check_platform_quant(const KernelInfo& info);
// A required scale attribute: finite and positive.
float scale_attr(const KernelInfo& info, const char* name);
// A bit-width attribute in [lo, hi]; dflt < 0 makes it required.
int bits_attr(const KernelInfo& info, const char* name, int dflt, int lo = 1, int hi = 32);
// int8 / int16 / int32 container of a bit width (1..32).
ONNXTensorElementDataType int_dtype_for_bits(int bits);
// Bits of an integer dtype (8, 16, 32), 0 otherwise.
int dtype_bits(ONNXTensorElementDataType t);
// Throws when onnxruntime resolved output i of this node to another type than `want` (e.g. a bit width that
// asks for int16 while the runtime could not run ortquant's type inference).
void expect_output_dtype(const KernelInfo& info, size_t i, ONNXTensorElementDataType want, const std::string& why);
// Declared input dtype (UNDEFINED when the graph does not say).
inline ONNXTensorElementDataType declared(const KernelInfo& info, size_t i) { return info.input_dtype(i); }

// Type inference: output 0 is the integer type of the bit-width attribute `attr` (default dflt), or float32
// when `float_if_absent` and the attribute is missing; its shape is input 0's.
void infer_bits_output(const InferContext& ctx, const char* attr, int dflt, bool float_if_absent = false);

// Output 0: int8 with the numpy broadcast of inputs 0 and 1 (no shape when it cannot be told).
void infer_broadcast_i8(const InferContext& ctx);
// Output 0: dtype t with input 0's shape.
template <ONNXTensorElementDataType T>
void infer_like_input0(const InferContext& ctx) {
  ctx.set_output_like(0, T, 0);
}
// Output 0: input 0's dtype (when known) and shape.
void infer_same_as_input0(const InferContext& ctx);

// OpSpec overloads of one op that differ only in the type of output 0 (onnxruntime picks the kernel by types;
// ortquant's type inference sets the output type from the attributes).
template <ONNXTensorElementDataType T>
OpSpec with_output0(OpSpec s) {
  s.outputs[0].type = T;
  return s;
}

}  // namespace ortquant::ort::lingerk
