// OpSpec factories of the nGraph family (domain "ngraph").
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

OpSpec ngraph_quantize_spec(const std::string& name);
OpSpec ngraph_dequantize_spec(const std::string& name);

}  // namespace ortquant::ort
