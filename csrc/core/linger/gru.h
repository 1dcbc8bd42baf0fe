// linger's GRUInt (shared/specs/linger.md section 4): int8 input and weights, gates r, z, n through the luna
// sigmoid/tanh tables, Q14 hidden, int8 (o_bits) or float32 output. The gate pre-activations saturate to int16
// (decision 12; linger's closed extension returns 0 beyond the table instead). Definition:
// python/ortquant/reference/linger_rnn.py.
#pragma once
#include "core/linger/rnn_common.h"

namespace ortquant::linger {

RnnPlan make_gru_plan(const RnnAttrs& a);
// Packs W_ih [3H, D], W_hh [3H, H] and the int32 biases [3H] (null = none).
RnnWeights make_gru_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                            const int32_t* b_hh);
// One run (io.c0 and io.cell are ignored).
void gru_int(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par);

}  // namespace ortquant::linger
