// OpSpec factories of the linger / thinker family (one .cc per op or op group in this folder), registered in the
// `thinker` and `onnxinfer` domains (decision 3). Ops whose output type depends on an attribute (Quant data_bits,
// Requant / BatchNorm / SoftmaxInt / LogSoftmaxInt o_bits) are registered as overloads that differ only in that
// output type (the int8 one first); ortquant's type inference (OpSpec::infer) picks the one the attributes ask
// for, and the kernel checks at creation that it got it.
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

OpSpec linger_quant_spec(const std::string& name);
OpSpec linger_quant_spec_i16(const std::string& name);
OpSpec linger_quant_spec_i32(const std::string& name);
OpSpec linger_dequant_spec(const std::string& name);
OpSpec linger_requant_spec(const std::string& name);
OpSpec linger_requant_spec_i16(const std::string& name);
OpSpec linger_requant_spec_i32(const std::string& name);
OpSpec linger_iqadd_spec(const std::string& name);
OpSpec linger_iqmul_spec(const std::string& name);
OpSpec linger_iqdiv_spec(const std::string& name);
OpSpec linger_iqcat_spec(const std::string& name);
OpSpec linger_iqclamp_spec(const std::string& name);
OpSpec linger_iqsigmoid_spec(const std::string& name);
OpSpec linger_iqtanh_spec(const std::string& name);
OpSpec linger_iqsum_spec(const std::string& name);
OpSpec linger_iqpad_spec(const std::string& name);
OpSpec linger_relu_spec(const std::string& name);
OpSpec linger_avgpool_spec(const std::string& name);
OpSpec linger_batchnorm2d_spec(const std::string& name);
OpSpec linger_batchnorm2d_spec_i16(const std::string& name);
OpSpec linger_batchnorm2d_spec_i32(const std::string& name);
OpSpec linger_batchnorm1d_spec(const std::string& name);
OpSpec linger_batchnorm1d_spec_i16(const std::string& name);
OpSpec linger_batchnorm1d_spec_i32(const std::string& name);
OpSpec linger_softmax_spec(const std::string& name);
OpSpec linger_softmax_spec_i16(const std::string& name);
OpSpec linger_softmax_spec_i32(const std::string& name);
OpSpec linger_softmax_spec_f32(const std::string& name);
OpSpec linger_logsoftmax_spec(const std::string& name);
OpSpec linger_logsoftmax_spec_i16(const std::string& name);
OpSpec linger_logsoftmax_spec_i32(const std::string& name);
OpSpec linger_logsoftmax_spec_f32(const std::string& name);
OpSpec linger_layernorm_spec(const std::string& name);

}  // namespace ortquant::ort
