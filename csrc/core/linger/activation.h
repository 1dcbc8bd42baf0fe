// linger iqSigmoid / iqTanh (thinker domain), spec: linger.md section 1, linger-extra.md section 6, decision 13.
//   v = floor(x * 2048/sx + 1/2)     (to Q11; a shift for power-of-two scales)
//   v = saturate to int16             (ortquant: linger's closed extension returns 0 beyond +-32768, a bug;
//                                      thinker saturates; see docs/ops.md)
//   y = SIG(v) in [0, 127] or TANH(v) in [-128, 127]   (Q7, scale_o = 128)
// The whole map is tabulated per node over the input domain: 256 entries for int8, 65,536 for int16 input.
#pragma once
#include <cstdint>
#include <vector>

namespace ortquant::linger {

enum class Activation { kSigmoid, kTanh };

// Table indexed by x - min(T): input_bits 8 (int8) or 16 (int16).
std::vector<int8_t> make_activation_table(Activation act, float sx, int input_bits);

template <class T>  // int8_t, int16_t
void activation_lookup(const T* x, int8_t* y, int64_t n, const int8_t* table);

}  // namespace ortquant::linger
