// linger / thinker sigmoid and tanh: Q11 input (int16 in practice), Q7 output (decision 13, linger.md "iqSigmoid"
// and "TANH"). Both are 16-segment piecewise-linear functions defined on integers; linger's closed extension and
// thinker's libluna agree on every int16 input. Used by iqSigmoid / iqTanh and by the LSTMInt / GRUInt steps.
//
// The segment formulas are exposed for any int64 input (the definition, and what the tables are built from);
// the 65,536-entry tables over int16 are built once per process on first use (thread-safe) and are what the
// kernels use.
#pragma once
#include <cstdint>

namespace ortquant::luna {

// Segment formulas. Input v is Q11; the result is clamp(round_half_up(q15 / 256), -128, 127) (Q7).
// For |v| beyond the last band (|v| > 32768) the closed extension returns 0; these functions do too
// (callers that follow ortquant's decision saturate v to int16 first).
int32_t sigmoid_q11_formula(int64_t v);
int32_t tanh_q11_formula(int64_t v);

// The segment constants of both definitions (bands[17], per-segment slopes, biases and right shifts [16]), for
// code that evaluates the same formulas with SIMD instead of the tables (the LSTM/GRU cell, whose tests check
// it against the tables on all 65,536 inputs).
extern const int32_t kSigBands[17], kSigSlopes[16], kSigBiasPos[16], kSigBiasNeg[16], kSigShifts[16];
extern const int32_t kTanhBands[17], kTanhSlopes[16], kTanhBias[16], kTanhShifts[16];

// Full tables: table[v + 32768] for v in [-32768, 32767]. sigmoid values are additionally clamped to [0, 127]
// (what iqSigmoid, LSTMInt and GRUInt apply; the formula never goes below 0 anyway), tanh values are in
// [-128, 127]. Built on first call, never freed.
const int8_t* sigmoid_table();
const int8_t* tanh_table();

// Table lookups for an int16 Q11 value.
inline int8_t sigmoid_q11(int16_t v) { return sigmoid_table()[int32_t(v) + 32768]; }
inline int8_t tanh_q11(int16_t v) { return tanh_table()[int32_t(v) + 32768]; }

// Saturates a Q11 value to int16 (ortquant's handling of pre-activations beyond the table, decision 12).
inline int16_t saturate_q11(int64_t v) {
  return static_cast<int16_t>(v < -32768 ? -32768 : (v > 32767 ? 32767 : v));
}

}  // namespace ortquant::luna
