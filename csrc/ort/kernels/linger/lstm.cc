// LSTMInt, LSTMInt_Is8_Is64, LSTMInt_Is8_Is64_If32_If32 (the kernel is shared with GRUInt: rnn_kernel.cc).
#include "ort/kernels/linger/linger_rnn_ops.h"
#include "ort/kernels/linger/rnn_kernel.h"

namespace ortquant::ort {

OpSpec linger_lstm_spec(const std::string& name) {
  return linger_rnn_spec(name, true, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8);
}
OpSpec linger_lstm_spec_f32(const std::string& name) {
  return linger_rnn_spec(name, true, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
}

}  // namespace ortquant::ort
