#include "core/linger/iqadd.h"

namespace ortquant::linger {

BinaryI8 make_iqadd(float sx, float sy, float so) {
  const luna::Rescale rx(double(so) / double(sx)), ry(double(so) / double(sy));
  if (rx.pow2 && ry.pow2) return BinaryI8::add_shift(rx.shift, ry.shift);
  return BinaryI8::from_fn([rx, ry](int8_t x, int8_t y) {
    // |rx(x)| and |ry(y)| are below 2^62 for any float32 scales except absurd ratios; saturate the sum anyway.
    const int64_t a = rx(x), b = ry(y);
    const int64_t s = (a > 0 && b > INT64_MAX - a) ? INT64_MAX : (a < 0 && b < INT64_MIN - a) ? INT64_MIN : a + b;
    return luna::saturate_to<int8_t>(s);
  });
}

int8_t iqadd_float(int8_t x, float y, float sx, float sy, float so) {
  const float xf = static_cast<float>(x) / sx;
  const float yf = y / sy;
  const float z = xf + yf;
  return static_cast<int8_t>(luna::float_out(z, so, 8));
}

UnaryI8 make_iqadd_const(float sx, float sy, float so, float c) {
  return UnaryI8::from_fn([=](int8_t x) { return iqadd_float(x, c, sx, sy, so); });
}

}  // namespace ortquant::linger
