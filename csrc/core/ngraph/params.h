// Shared pieces of nGraph Quantize/Dequantize (domain "ngraph"; spec: shared/specs/ort-custom-ops.md 4.1-4.2,
// decision 9): the element types, the `type` attribute spellings and the `axes` rule for scale/zero_point.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace ortquant::ngraph {

// Quantized element types: nGraph's i8, u8, i32 plus int16/uint16.
enum class QuantType : uint8_t { kInt8, kUInt8, kInt16, kUInt16, kInt32 };
// Real element types: float32 and float16 (stored as uint16_t bits).
enum class RealType : uint8_t { kFloat32, kFloat16 };

const char* quant_type_name(QuantType t);
const char* real_type_name(RealType t);
size_t quant_type_size(QuantType t);
size_t real_type_size(RealType t);

// The string form of the `type` attribute, case-insensitive: "i8", "int8", "int8_t" (and likewise u8/uint8,
// i16/int16, u16/uint16, i32/int32); real types: "f32", "float32", "float", "f16", "float16", "half".
bool parse_quant_type(const std::string& name, QuantType* out);
bool parse_real_type(const std::string& name, RealType* out);
// The integer form: the onnx TensorProto.DataType value (INT8 = 3, UINT8 = 2, INT16 = 5, UINT16 = 4,
// INT32 = 6; FLOAT = 1, FLOAT16 = 10).
bool quant_type_from_onnx(int64_t onnx_type, QuantType* out);
bool real_type_from_onnx(int64_t onnx_type, RealType* out);

// Checks the `axes` attribute before the input rank is known: no axis repeated. Throws Error.
void check_axes(const std::vector<int64_t>& axes);

// Resolves `axes` against the input rank: negative axes count from the end (ONNX style); every axis must be in
// [-rank, rank) and appear once. Returns them sorted ascending (nGraph's AxisSet order). Throws Error.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, size_t rank);

// Validates the shapes of scale and zero_point and returns the shape they broadcast as against the input: the
// input's dims at the axes and 1 elsewhere (the parameters' row-major layout is unchanged by the inserted 1s).
//  - nGraph's rule: scale and zero_point both have shape (input dims at the sorted axes), so rank == |axes|;
//  - per-tensor (axes empty): scale and zero_point each have exactly one element (any rank, e.g. () or (1,)).
// Throws Error naming the shapes otherwise.
Shape param_shape(const Shape& input, const std::vector<int64_t>& sorted_axes, const Shape& scale,
                  const Shape& zero_point);

}  // namespace ortquant::ngraph
