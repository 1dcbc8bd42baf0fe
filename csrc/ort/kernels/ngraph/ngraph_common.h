// Helpers shared by the nGraph Quantize/Dequantize adapters.
#pragma once
#include <string>

#include "core/ngraph/params.h"
#include "ort/op.h"

namespace ortquant::ort::ngraph_detail {

ONNXTensorElementDataType onnx_type(ngraph::QuantType t);
ONNXTensorElementDataType onnx_type(ngraph::RealType t);

// Checks the optional `type` attribute (a string spelling or an onnx TensorProto.DataType integer) against the
// element type the kernel was chosen for (`what` says which input fixes it). Throws Error naming 'type'.
void check_type_attr(const KernelInfo& info, ngraph::QuantType want, const char* what);
void check_type_attr(const KernelInfo& info, ngraph::RealType want, const char* what);

}  // namespace ortquant::ort::ngraph_detail
