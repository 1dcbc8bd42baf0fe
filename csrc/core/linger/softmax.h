// linger SoftmaxInt / LogSoftmaxInt (thinker domain), spec: linger-extra.md sections 1 and 2 (the integer
// kernels of linger's closed extension, reconstructed there and verified with zero mismatches).
//
// Rows run along `dim` (layout outer x n x inner). Per row:
//   SoftmaxInt:    X = toQ25(x) saturated to int32; P = clamp(SOFTMAX(X), 0, 32767);
//                  y = clamp(toint_x86(floor(fl32(fl32(P * so) / 2^15) + 0.5)), -128, 127)   (also for o_bits 16,
//                  as linger does), or float32 P / 2^15 without o_bits.
//   LogSoftmaxInt: X = toQ25(x) with x86's int() (out of range -> INT32_MIN); Q = clamp(LOGN(SOFTMAX(X)), -2^31, 0);
//                  y = clamp(floor(fl32(fl32(fl32(Q) / 2^25 * so) + 0.5)), o_bits range), or float32 fl32(Q) / 2^25.
// toQ25(x): l = 25 - trunc(log2(scale_x)); l > 0: fl32(x * 2^l); else floor(fl32(x * 2^l) + 0.5) (float32, as linger).
#pragma once
#include <cstdint>

namespace ortquant::linger {

// The SOFTMAX kernel on one row: X (Q25, int32) -> out (Q15, in [0, 32768]). scratch holds n int64.
void softmax_q25_row(const int32_t* X, int64_t n, int32_t* out, int64_t* scratch);
// The LOGN kernel: v (Q15) -> ln(v / 2^15) in Q25; v <= 0 gives -2^31.
int32_t logn_q15(int32_t v);

enum class SoftmaxKind { kSoftmax, kLogSoftmax };

struct SoftmaxOutput {
  bool is_float = false;  // no o_bits: float32 output
  float scale_o = 1.f;
  int o_bits = 8;
};

// Rows [row_begin, row_end) of the outer x inner rows; Ti = int8_t or int16_t; To = int8_t, int16_t, int32_t or
// float (matching out.is_float / o_bits).
template <class Ti, class To>
void softmax_int(SoftmaxKind kind, const Ti* x, To* y, int64_t outer, int64_t n, int64_t inner, float scale_x,
                 const SoftmaxOutput& out, int64_t row_begin, int64_t row_end);

}  // namespace ortquant::linger
