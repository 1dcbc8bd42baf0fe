// The onnxruntime kernel shared by LSTMInt and GRUInt (and their _Is8_Is64* names): attributes and the input form
// at creation, constant weights packed once, one core::linger run per Compute. See linger_rnn_ops.h for the forms.
#pragma once
#include <optional>
#include <string>

#include "core/linger/rnn_common.h"
#include "ort/op.h"
#include "ort/params.h"

namespace ortquant::ort {

class LingerRnnKernel : public OpKernel {
 public:
  LingerRnnKernel(const KernelInfo& info, bool lstm);
  void compute(KernelContext& ctx) const override;

  // Type and shape inference of the LSTM (3 outputs) and GRU (2 outputs) ops.
  static void infer_lstm(const InferContext& c);
  static void infer_gru(const InferContext& c);

 private:
  // Input positions of the node's form (-1 = absent).
  struct Form {
    int lengths = -1, h0 = -1, c0 = -1, w_ih = -1, w_hh = -1, b_ih = -1, b_hh = -1;
  };
  linger::RnnWeights weights_from(const TensorView& w_ih, const TensorView& w_hh, const std::optional<TensorView>& b_ih,
                                  const std::optional<TensorView>& b_hh) const;

  bool lstm_;
  int gates_;
  const char* op_;  // "LSTMInt" / "GRUInt" for messages
  Form form_;
  linger::RnnPlan plan_;
  bool input_size_given_ = false;
  ParamInput lengths_, h0_, c0_, w_ih_, w_hh_, b_ih_, b_hh_;
  std::optional<linger::RnnWeights> packed_;  // when all weights and biases are constant initializers
};

// The OpSpec of one name: LSTM (8 inputs, 3 outputs) or GRU (7 inputs, 2 outputs), output 0 of dtype out0 (int8
// with o_bits, float32 without: two overloads per name, onnxruntime picks the one ortquant's type inference
// resolved).
OpSpec linger_rnn_spec(const std::string& name, bool lstm, ONNXTensorElementDataType out0);

}  // namespace ortquant::ort
