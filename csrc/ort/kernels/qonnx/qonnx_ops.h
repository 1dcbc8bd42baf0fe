// OpSpec factories of the QONNX family (one .cc per op in this folder). The name is passed in so the same
// kernel serves aliases (Quant/IntQuant, Trunc/TruncQuant). The elementwise quantizers have one OpSpec per
// accepted float32/float16 input combination (onnxruntime picks the kernel by input types; each has a fixed
// output type).
#pragma once
#include <string>
#include <vector>

#include "ort/op.h"

namespace ortquant::ort {

std::vector<OpSpec> quant_specs(const std::string& name);
OpSpec multithreshold_spec(const std::string& name);
OpSpec xnorpopcount_spec(const std::string& name);
OpSpec im2col_spec(const std::string& name);
std::vector<OpSpec> bipolar_quant_specs(const std::string& name);
std::vector<OpSpec> trunc_specs(const std::string& name);
std::vector<OpSpec> float_quant_specs(const std::string& name);
OpSpec maxpoolnhwc_spec(const std::string& name);
OpSpec quantavgpool2d_spec(const std::string& name);
OpSpec debugmarker_spec(const std::string& name);
OpSpec genericpartition_spec(const std::string& name);

}  // namespace ortquant::ort
