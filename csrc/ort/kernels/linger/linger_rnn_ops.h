// OpSpec factories of linger's recurrent ops (domain group thinker/onnxinfer). One op per name, declared with the
// longest input list linger or the seed writes, trailing inputs optional (decision 16); the kernel reads the form
// from the input count and dtypes:
//   LSTMInt*: [x, (lengths int64|int32), (h0 f32, c0 f32), W_ih int8, W_hh int8, (B_ih int32, B_hh int32)]
//   GRUInt*:  [x, (lengths int64|int32), (h0 f32),         W_ih int8, W_hh int8, (B_ih int32, B_hh int32)]
// Every name accepts every form (LSTMInt_Is8_Is64 is the lengths form, LSTMInt_Is8_Is64_If32_If32 the lengths +
// state form, and likewise for GRU; linger 1.1.1 itself writes all LSTM forms as LSTMInt).
#pragma once
#include <string>

#include "ort/op.h"

namespace ortquant::ort {

// Two overloads per name, by the dtype of output 0: int8 (o_bits present; registered first) and float32.
OpSpec linger_lstm_spec(const std::string& name);
OpSpec linger_lstm_spec_f32(const std::string& name);
OpSpec linger_gru_spec(const std::string& name);
OpSpec linger_gru_spec_f32(const std::string& name);

}  // namespace ortquant::ort
