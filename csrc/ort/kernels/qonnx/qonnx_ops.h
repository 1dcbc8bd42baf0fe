// OpSpec factories of the QONNX family (one .cc per op in this folder). The name is passed in so the same
// kernel serves aliases (Quant/IntQuant, Trunc/TruncQuant).
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

OpSpec quant_spec(const std::string& name);
OpSpec multithreshold_spec(const std::string& name);
OpSpec xnorpopcount_spec(const std::string& name);
OpSpec im2col_spec(const std::string& name);
OpSpec bipolar_quant_spec(const std::string& name);
OpSpec trunc_spec(const std::string& name);
OpSpec float_quant_spec(const std::string& name);
OpSpec maxpoolnhwc_spec(const std::string& name);
OpSpec quantavgpool2d_spec(const std::string& name);
OpSpec debugmarker_spec(const std::string& name);
OpSpec genericpartition_spec(const std::string& name);

}  // namespace ortquant::ort
