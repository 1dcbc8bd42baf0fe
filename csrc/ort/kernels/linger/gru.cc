// GRUInt, GRUInt_Is8_Is64, GRUInt_Is8_Is64_If32 (the kernel is shared with LSTMInt: rnn_kernel.cc).
#include "ort/kernels/linger/linger_rnn_ops.h"
#include "ort/kernels/linger/rnn_kernel.h"

namespace ortquant::ort {

OpSpec linger_gru_spec(const std::string& name) {
  return linger_rnn_spec(name, false, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8);
}
OpSpec linger_gru_spec_f32(const std::string& name) {
  return linger_rnn_spec(name, false, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
}

}  // namespace ortquant::ort
