#include "core/linger/iqdiv.h"

namespace ortquant::linger {

int8_t iqdiv_float(int8_t x, float yf, float sx, float so) {
  const float xf = static_cast<float>(x) / sx;
  const float z = xf / yf;
  return static_cast<int8_t>(luna::float_out(z, so, 8));
}

BinaryI8 make_iqdiv(float sx, float sy, float so) {
  return BinaryI8::from_fn([=](int8_t x, int8_t y) { return iqdiv_float(x, static_cast<float>(y) / sy, sx, so); });
}

UnaryI8 make_iqdiv_const(float sx, float sy, float so, float c) {
  const float yf = c / sy;
  return UnaryI8::from_fn([=](int8_t x) { return iqdiv_float(x, yf, sx, so); });
}

}  // namespace ortquant::linger
