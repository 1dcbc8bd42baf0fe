#include "core/linger/activation.h"

#include <limits>

#include "core/error.h"
#include "core/lut.h"
#include "core/requant.h"

namespace ortquant::linger {

std::vector<int8_t> make_activation_table(Activation act, float sx, int input_bits) {
  if (input_bits != 8 && input_bits != 16) throw_error("activation input must be int8 or int16");
  const luna::Rescale to_q11(2048.0 / double(sx));
  const int32_t lo = input_bits == 8 ? -128 : -32768, hi = input_bits == 8 ? 127 : 32767;
  const int8_t* table = act == Activation::kSigmoid ? luna::sigmoid_table() : luna::tanh_table();
  std::vector<int8_t> t(static_cast<size_t>(hi - lo + 1));
  for (int32_t x = lo; x <= hi; ++x)
    t[static_cast<size_t>(x - lo)] = table[int32_t(luna::saturate_q11(to_q11(x))) + 32768];
  return t;
}

template <class T>
void activation_lookup(const T* x, int8_t* y, int64_t n, const int8_t* table) {
  constexpr int32_t off = -int32_t(std::numeric_limits<T>::min());
  for (int64_t i = 0; i < n; ++i) y[i] = table[int32_t(x[i]) + off];
}
template void activation_lookup<int8_t>(const int8_t*, int8_t*, int64_t, const int8_t*);
template void activation_lookup<int16_t>(const int16_t*, int8_t*, int64_t, const int8_t*);

}  // namespace ortquant::linger
