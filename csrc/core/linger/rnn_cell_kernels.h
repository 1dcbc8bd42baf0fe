// Per-ISA loops of one LSTM/GRU time step for one batch row (see core/isa.h): the gate sums, table lookups and
// the state update, vectorized over the hidden units. The scalar file is the oracle of the others.
//
// Tables: `sig` / `tanh` point at the value for input 0 of 65,536-entry int8 tables (index v for v in
// [-32768, 32767]) with at least 3 readable bytes after the last entry (for 32-bit gathers); see gate_tables().
#pragma once
#include <cstdint>

#include "core/isa.h"
#include "core/linger/rnn_common.h"

namespace ortquant::linger {

struct GateTables {
  const int8_t* sig;   // clamped to [0, 127]
  const int8_t* tanh;  // [-128, 127]
};
// The luna sigmoid/tanh tables (core/lut.h) in the layout above, built once per process.
const GateTables& gate_tables();

// LSTM (gates i, f, g, o; gi and gh are the Q11 projections [4H] of this row and step):
//   s = sat16(gi + gh) (saturating), i,f,o = SIG(s), g = TANH(s), c14 = f * c7 + i * g,
//   h14 = o * TANH(sat16(round(c14 / 8))), c7 <- round(c14 / 128).
// GRU (gates r, z, n):
//   r, z = SIG(sat16(gi + gh)), rn = round(r * gh_n / 128), n = TANH(sat16(gi_n + rn)),
//   h14 = 128 * n + z * (h7 - n).
// Emit: the Q14 hidden -> the output row (int8 at scale_o, or float32 h14 / 2^14), the next step's int8 hidden
// qh, the GRU's next h7 (when h7 is not null), and `last` (the output int, or h14 for float output).
ORTQUANT_DECLARE_ISA_FN(void, lstm_cell_row,
                        (const int32_t* gi, const int32_t* gh, int64_t h, const GateTables& t, int32_t* c7,
                         int32_t* c14, int32_t* h14))
ORTQUANT_DECLARE_ISA_FN(void, gru_cell_row,
                        (const int32_t* gi, const int32_t* gh, int64_t h, const GateTables& t, const int32_t* h7,
                         int32_t* h14))
ORTQUANT_DECLARE_ISA_FN(void, rnn_emit_row,
                        (const RnnPlan& p, const int32_t* h14, int64_t h, void* y, int8_t* qh, int32_t* h7,
                         int32_t* last))
// The gate activations of this path on int32 inputs saturated to int16 (for tests: every path against the tables).
ORTQUANT_DECLARE_ISA_FN(void, gate_activations,
                        (const int32_t* v, int64_t n, const GateTables& t, int32_t* sig, int32_t* tanh))

}  // namespace ortquant::linger
