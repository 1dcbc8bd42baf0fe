// linger BatchNorm2dInt / BatchNorm1dInt (thinker domain), spec: linger.md section 2, decision 15. Channel axis 1.
//   1.1.1 layout (x, weight int8[C], bias int32[C], running_mean, running_var; the last two unused):
//     o = saturate(floor((x * w[c] + b[c]) * so / (sx * sw) + 1/2), o_bits)
//   the seed's older layout (x, mul_w[C], add_b[C], attributes scale_mul_x/_w/_o, scale_add_b/_o):
//     m = saturate(floor(x * mul_w[c] * smo / (smx * smw) + 1/2), o_bits)
//     o = saturate(floor(m * sao / smo + 1/2) + floor(add_b[c] * sao / sab + 1/2), o_bits)
#pragma once
#include <cstdint>
#include <vector>

#include "core/requant.h"

namespace ortquant::linger {

struct BatchNormParams {
  bool old_layout = false;
  luna::Rescale r_out;              // 1.1.1: so / (sx * sw); old: smo / (smx * smw)
  luna::Rescale r_m, r_b;           // old: sao / smo, sao / sab
  int o_bits = 8;
  std::vector<int64_t> w, b;        // per channel (size C), or size 1 broadcast
};

// x: [N, C, rest...] as (N, C, inner); planes [plane_begin, plane_end) of the N*C planes. To = int8_t/int16_t/int32_t.
template <class Ti, class To>
void batchnorm_int(const Ti* x, To* y, int64_t C, int64_t inner, const BatchNormParams& p, int64_t plane_begin,
                   int64_t plane_end);

}  // namespace ortquant::linger
