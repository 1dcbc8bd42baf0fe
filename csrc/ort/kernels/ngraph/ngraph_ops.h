// OpSpec factories of the nGraph family (domain "ngraph"). onnxruntime picks a kernel by input types and each
// kernel has one fixed output type (ort-custom-ops.md 1.2), so each op is one OpSpec per dtype combination, all
// under the same name with the same inputs and outputs.
#pragma once
#include <string>
#include <vector>

#include "ort/op.h"

namespace ortquant::ort {

// Quantize(input, scale, zero_point) -> output: input/scale float32 or float16, zero_point/output int8, uint8,
// int16, uint16 or int32 (10 OpSpecs).
std::vector<OpSpec> ngraph_quantize_specs(const std::string& name);
// Dequantize(input, scale, zero_point) -> output: input/zero_point int8, uint8, int16, uint16 or int32,
// scale/output float32 or float16 (10 OpSpecs).
std::vector<OpSpec> ngraph_dequantize_specs(const std::string& name);

}  // namespace ortquant::ort
