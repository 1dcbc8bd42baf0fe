#include "ort/kernels/ngraph/ngraph_common.h"

namespace ortquant::ort::ngraph_detail {
namespace {

struct TypeAttr {
  bool present = false;
  bool is_int = false;
  int64_t value = 0;
  std::string name;
};

TypeAttr read_type_attr(const KernelInfo& info) {
  TypeAttr t;
  if (!info.has_attr("type")) return t;
  t.present = true;
  try {
    t.value = info.attr_int("type");
    t.is_int = true;
    return t;
  } catch (const Error&) {
    // Not an integer: must be a string (attr_string throws naming 'type' otherwise).
  }
  t.name = info.attr_string("type");
  return t;
}

template <class T, class Parse, class FromOnnx>
void check(const KernelInfo& info, T want, const char* want_name, const char* what, Parse parse, FromOnnx from_onnx,
           const char* spellings) {
  const TypeAttr a = read_type_attr(info);
  if (!a.present) return;
  T got{};
  if (a.is_int) {
    if (!from_onnx(a.value, &got))
      throw_error("attribute 'type': ", a.value, " is not a supported onnx TensorProto data type here (", spellings,
                  ")");
  } else if (!parse(a.name, &got)) {
    throw_error("attribute 'type': unknown type '", a.name, "' (", spellings, ")");
  }
  if (got != want) {
    throw_error("attribute 'type' says ",
                a.is_int ? std::to_string(a.value) : "'" + a.name + "'", " but ", what, " is ", want_name);
  }
}

}  // namespace

ONNXTensorElementDataType onnx_type(ngraph::QuantType t) {
  switch (t) {
    case ngraph::QuantType::kInt8: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    case ngraph::QuantType::kUInt8: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case ngraph::QuantType::kInt16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
    case ngraph::QuantType::kUInt16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16;
    case ngraph::QuantType::kInt32: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

ONNXTensorElementDataType onnx_type(ngraph::RealType t) {
  return t == ngraph::RealType::kFloat32 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
}

void check_type_attr(const KernelInfo& info, ngraph::QuantType want, const char* what) {
  check(info, want, ngraph::quant_type_name(want), what, &ngraph::parse_quant_type, &ngraph::quant_type_from_onnx,
        "i8/int8, u8/uint8, i16/int16, u16/uint16, i32/int32, or onnx data types 3, 2, 5, 4, 6");
}

void check_type_attr(const KernelInfo& info, ngraph::RealType want, const char* what) {
  check(info, want, ngraph::real_type_name(want), what, &ngraph::parse_real_type, &ngraph::real_type_from_onnx,
        "f32/float32/float, f16/float16/half, or onnx data types 1, 10");
}

}  // namespace ortquant::ort::ngraph_detail
