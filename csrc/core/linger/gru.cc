#include "core/linger/gru.h"

#include "core/linger/rnn_run.h"

namespace ortquant::linger {

RnnPlan make_gru_plan(const RnnAttrs& a) { return make_rnn_plan(a, 3); }

RnnWeights make_gru_weights(const RnnPlan& p, const int8_t* w_ih, const int8_t* w_hh, const int32_t* b_ih,
                            const int32_t* b_hh) {
  return make_rnn_weights(p, w_ih, w_hh, b_ih, b_hh);
}

void gru_int(const RnnPlan& p, const RnnWeights& w, const RnnIo& io, const RnnParallel& par) {
  RnnIo g = io;
  g.c0 = nullptr;
  g.cell = nullptr;
  run_rnn(p, w, g, par);
}

}  // namespace ortquant::linger
