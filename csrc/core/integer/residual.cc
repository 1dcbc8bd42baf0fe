#include "core/integer/residual.h"

namespace ortquant::integer {

void add_residual(float* __restrict y, const float* __restrict r, int64_t n, bool relu) {
  if (relu) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i] + r[i];
      y[i] = v < 0.f ? 0.f : v;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] += r[i];
  }
}

}  // namespace ortquant::integer
