#include "core/linger/batchnorm.h"

namespace ortquant::linger {
namespace {

int64_t sat_add(int64_t a, int64_t b) {
  if (a > 0 && b > INT64_MAX - a) return INT64_MAX;
  if (a < 0 && b < INT64_MIN - a) return INT64_MIN;
  return a + b;
}

}  // namespace

template <class Ti, class To>
void batchnorm_int(const Ti* x, To* y, int64_t C, int64_t inner, const BatchNormParams& p, int64_t plane_begin,
                   int64_t plane_end) {
  for (int64_t pl = plane_begin; pl < plane_end; ++pl) {
    const int64_t c = pl % C;
    const int64_t w = p.w[p.w.size() == 1 ? 0 : static_cast<size_t>(c)];
    const int64_t b = p.b[p.b.size() == 1 ? 0 : static_cast<size_t>(c)];
    const Ti* xp = x + pl * inner;
    To* yp = y + pl * inner;
    if (!p.old_layout) {
      for (int64_t i = 0; i < inner; ++i)
        yp[i] = static_cast<To>(luna::saturate(p.r_out(sat_add(int64_t(xp[i]) * w, b)), p.o_bits));
    } else {
      const int64_t bo = p.r_b(b);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t m = luna::saturate(p.r_out(int64_t(xp[i]) * w), p.o_bits);
        yp[i] = static_cast<To>(luna::saturate(sat_add(p.r_m(m), bo), p.o_bits));
      }
    }
  }
}

#define ORTQUANT_BN(Ti, To) \
  template void batchnorm_int<Ti, To>(const Ti*, To*, int64_t, int64_t, const BatchNormParams&, int64_t, int64_t);
ORTQUANT_BN(int8_t, int8_t)
ORTQUANT_BN(int8_t, int16_t)
ORTQUANT_BN(int8_t, int32_t)
#undef ORTQUANT_BN

}  // namespace ortquant::linger
