#include "core/linger/lstm.h"

#include "core/linger/rnn_run.h"

namespace ortquant::linger {

RnnPlan make_lstm_plan(const RnnAttrs& a) { return make_rnn_plan(a, 4); }

RnnWeights make_lstm_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                             const int32_t* b_hh) {
  return make_rnn_weights(p, w_ih, w_hh, b_ih, b_hh);
}

void lstm_int(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par) {
  run_rnn(p, w, io, par);
}

}  // namespace ortquant::linger
