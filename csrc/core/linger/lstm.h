// linger's LSTMInt (shared/specs/linger.md section 4): int8 input and weights, gates i, f, g, o through the luna
// sigmoid/tanh tables, Q14 cell and hidden, int8 (o_bits) or float32 output. The step-by-step definition is
// python/ortquant/reference/linger_rnn.py; rnn_common.h says where the integer arithmetic saturates.
#pragma once
#include "core/linger/rnn_common.h"

namespace ortquant::linger {

// Validates the attributes (throws Error naming the attribute).
RnnPlan make_lstm_plan(const RnnAttrs& a);
// Packs W_ih [4H, D], W_hh [4H, H] and the int32 biases [4H] (null = none). Shapes are the caller's to check.
RnnWeights make_lstm_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                             const int32_t* b_hh);
// One run (io.cell receives the final cell state; io.c0 is the optional initial cell).
void lstm_int(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par);

}  // namespace ortquant::linger
