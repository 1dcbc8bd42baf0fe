// The recurrence driver shared by LSTMInt and GRUInt (lstm.h, gru.h): input projection for all time steps in
// one call, then per step the recurrent projection of a group of batch rows and the per-row cell update.
#pragma once
#include "core/linger/rnn_common.h"

namespace ortquant::linger {

// Runs the recurrence of plan p (p.gates: 4 = LSTM, 3 = GRU) over io. Validates h0/c0 (no NaN); io.lengths must
// already be in [1, seq_len] and io.t_out = max(lengths). Threads only through par.
void run_rnn(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par);

}  // namespace ortquant::linger
