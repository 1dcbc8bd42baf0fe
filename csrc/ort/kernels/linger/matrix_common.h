// Helpers shared by the linger matrix-op adapters: the output (o_bits / scale_o or float) as a GEMM epilogue,
// dtype checks, the bias input, and the bridge from the GEMM engine's parallel callback to onnxruntime's pool.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/gemm/gemm.h"
#include "ort/op.h"

namespace ortquant::ort::matrix {

constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
constexpr ONNXTensorElementDataType kI16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
constexpr ONNXTensorElementDataType kI32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;

// The requantization of a matrix op (linger.md section 3, decision 11): with o_bits,
//   q = saturate(floor((sum + bias) * scale_o / (scale_a * scale_b) + 0.5), o_bits)   (float64 arithmetic)
// stored as int8 (o_bits <= 8), int16 (<= 16) or int32; without o_bits, float32((sum + bias) / (scale_a * scale_b)).
struct OutputSpec {
  ONNXTensorElementDataType dtype = kI8;
  gemm::Epilogue ep;  // bias left null
};
// Reads and validates scale_a, scale_b, o_bits, scale_o, data_bits/parameter_bits (when present) and
// platform_quant; checks that onnxruntime resolved output 0 to the dtype o_bits asks for.
OutputSpec output_spec(const KernelInfo& info, const char* scale_a, const char* scale_b);

// Output 0's dtype from the attributes (type inference; never throws).
ONNXTensorElementDataType infer_out_dtype(const InferContext& ctx);

// Throws unless `got` is `want` (UNDEFINED, an input the graph does not type, passes).
void check_dtype(ONNXTensorElementDataType got, ONNXTensorElementDataType want, const char* what);

// The int32 bias data of shape [n] (nullptr when absent); throws for another dtype or shape.
const int32_t* bias_data(const std::optional<TensorView>& b, int64_t n);

// The GEMM engine's parallel callback on onnxruntime's intra-op pool.
gemm::Parallel parallel(const KernelContext& ctx);

// Overloads that differ only in the type of output 0.
template <ONNXTensorElementDataType T>
OpSpec with_output0(OpSpec s) {
  s.outputs[0].type = T;
  return s;
}

// Reads an INTS attribute of exactly `n` values (or the default when absent).
std::vector<int64_t> ints_attr(const KernelInfo& info, const char* name, size_t n, const std::vector<int64_t>& dflt);

}  // namespace ortquant::ort::matrix
