#include "core/linger/quant.h"

#include <cmath>
#include <type_traits>

#include "core/linger/elementwise.h"

namespace ortquant::linger {

int container_bits(int bits) {
  if (bits < 1 || bits > 32) throw_error("bit width must be between 1 and 32, got ", bits);
  return bits <= 8 ? 8 : (bits <= 16 ? 16 : 32);
}

void quant(const float* x, int8_t* y, int64_t n, float scale, int bits) {
  quant_f32_to_i8(x, y, n, scale, static_cast<float>(luna::int_min(bits)), static_cast<float>(luna::int_max(bits)));
}

void quant(const float* x, int16_t* y, int64_t n, float scale, int bits) {
  quant_f32_to_i16(x, y, n, scale, static_cast<float>(luna::int_min(bits)), static_cast<float>(luna::int_max(bits)));
}

void quant(const float* x, int32_t* y, int64_t n, float scale, int bits) {
  const double lo = static_cast<double>(luna::int_min(bits)), hi = static_cast<double>(luna::int_max(bits));
  for (int64_t i = 0; i < n; ++i) {
    float t = x[i] * scale;
    t = t + 0.5f;
    const double f = std::floor(static_cast<double>(t));
    y[i] = !(f == f) ? 0 : static_cast<int32_t>(f < lo ? lo : (f > hi ? hi : f));
  }
}

template <class T>
void dequant(const T* x, float* y, int64_t n, float scale) {
  dequant_to_f32(x, y, n, scale);
}
template void dequant<int8_t>(const int8_t*, float*, int64_t, float);
template void dequant<int16_t>(const int16_t*, float*, int64_t, float);
template void dequant<int32_t>(const int32_t*, float*, int64_t, float);

template <class Ti, class To>
void requant(const Ti* x, To* y, int64_t n, const luna::Rescale& r, int o_bits) {
  constexpr bool small = sizeof(Ti) <= 2 && sizeof(To) <= 2;
  if constexpr (small) {
    if (r.pow2 && o_bits == 8 * int(sizeof(To))) {
      shift_requant(x, y, n, r.shift);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(luna::saturate(r(x[i]), o_bits));
}

#define ORTQUANT_REQUANT(Ti, To) template void requant<Ti, To>(const Ti*, To*, int64_t, const luna::Rescale&, int);
ORTQUANT_REQUANT(int8_t, int8_t)
ORTQUANT_REQUANT(int8_t, int16_t)
ORTQUANT_REQUANT(int8_t, int32_t)
ORTQUANT_REQUANT(int16_t, int8_t)
ORTQUANT_REQUANT(int16_t, int16_t)
ORTQUANT_REQUANT(int16_t, int32_t)
ORTQUANT_REQUANT(int32_t, int8_t)
ORTQUANT_REQUANT(int32_t, int16_t)
ORTQUANT_REQUANT(int32_t, int32_t)
#undef ORTQUANT_REQUANT

}  // namespace ortquant::linger
