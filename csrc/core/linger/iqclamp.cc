#include "core/linger/iqclamp.h"

#include <cmath>

namespace ortquant::linger {

UnaryI8 make_iqclamp(float sx, float so, float min, float max) {
  if (std::isnan(min) || std::isnan(max)) throw_error("attributes 'min' and 'max' must not be NaN");
  if (min > max) throw_error("attribute 'min' (", min, ") must not exceed 'max' (", max, ")");
  const double lo_d = std::ceil(double(min) * double(so)), hi_d = std::floor(double(max) * double(so));
  const int64_t lo = lo_d < -128.0 ? -128 : (lo_d > 127.0 ? 127 : static_cast<int64_t>(lo_d));
  const int64_t hi = hi_d > 127.0 ? 127 : (hi_d < -128.0 ? -128 : static_cast<int64_t>(hi_d));
  if (lo > hi) throw_error("attributes 'min' and 'max' leave no int8 value at scale_o ", so);
  const luna::Rescale r(double(so) / double(sx));
  return UnaryI8::from_fn([=](int8_t x) {
    const int64_t q = r(x);
    return static_cast<int8_t>(q < lo ? lo : (q > hi ? hi : q));
  });
}

}  // namespace ortquant::linger
