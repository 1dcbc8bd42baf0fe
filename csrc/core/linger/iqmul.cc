#include "core/linger/iqmul.h"

namespace ortquant::linger {

BinaryI8 make_iqmul(float sx, float sy, float so) {
  const luna::Rescale r(double(so) / (double(sx) * double(sy)));
  if (r.pow2) return BinaryI8::mul_shift(r.shift);
  return BinaryI8::from_fn([r](int8_t x, int8_t y) { return luna::saturate_to<int8_t>(r(int64_t(x) * y)); });
}

int8_t iqmul_float(int8_t x, float y, float sx, float sy, float so) {
  const float xf = static_cast<float>(x) / sx;
  const float yf = y / sy;
  const float z = xf * yf;
  return static_cast<int8_t>(luna::float_out(z, so, 8));
}

UnaryI8 make_iqmul_const_float(float sx, float sy, float so, float c) {
  return UnaryI8::from_fn([=](int8_t x) { return iqmul_float(x, c, sx, sy, so); });
}

}  // namespace ortquant::linger
