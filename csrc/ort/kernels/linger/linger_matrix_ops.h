// OpSpec factories of the linger matrix ops (LinearInt, BmmInt, Conv2dInt, Conv1dInt, ConvTranspose2dInt),
// registered in the `thinker` and `onnxinfer` domains (decision 3). Output 0 is int8, int16, int32 (o_bits) or
// float32 (no o_bits): one overload per type, the int8 one first; the type inference (OpSpec::infer) declares
// the one the attributes ask for and the kernel checks at creation that onnxruntime resolved it.
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

OpSpec linear_int_spec(const std::string& name);
OpSpec linear_int_spec_i16(const std::string& name);
OpSpec linear_int_spec_i32(const std::string& name);
OpSpec linear_int_spec_f32(const std::string& name);
OpSpec bmm_int_spec(const std::string& name);
OpSpec bmm_int_spec_i16(const std::string& name);
OpSpec bmm_int_spec_i32(const std::string& name);
OpSpec bmm_int_spec_f32(const std::string& name);
OpSpec conv2d_int_spec(const std::string& name);
OpSpec conv2d_int_spec_i16(const std::string& name);
OpSpec conv2d_int_spec_i32(const std::string& name);
OpSpec conv2d_int_spec_f32(const std::string& name);
OpSpec conv1d_int_spec(const std::string& name);
OpSpec conv1d_int_spec_i16(const std::string& name);
OpSpec conv1d_int_spec_i32(const std::string& name);
OpSpec conv1d_int_spec_f32(const std::string& name);
OpSpec conv_transpose2d_int_spec(const std::string& name);
OpSpec conv_transpose2d_int_spec_i16(const std::string& name);
OpSpec conv_transpose2d_int_spec_i32(const std::string& name);
OpSpec conv_transpose2d_int_spec_f32(const std::string& name);

}  // namespace ortquant::ort
