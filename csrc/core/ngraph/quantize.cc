#include "core/ngraph/quantize.h"

#include "core/error.h"
#include "core/ngraph/kernels.h"

namespace ortquant::ngraph {

bool is_ngraph_round_mode(RoundMode mode) {
  switch (mode) {
    case RoundMode::kHalfEven:
    case RoundMode::kHalfAway:
    case RoundMode::kHalfTowardZero:
    case RoundMode::kHalfUp:
    case RoundMode::kHalfDown:
    case RoundMode::kCeil:
    case RoundMode::kFloor:
    case RoundMode::kTowardZero:
    case RoundMode::kAwayFromZero: return true;
    default: return false;
  }
}

void quantize(const BroadcastPlan& plan, RealType rt, QuantType qt, const void* x, const void* scale,
              const void* zero_point, void* y, int64_t begin, int64_t end, RoundMode mode) {
  if (!is_ngraph_round_mode(mode)) throw_error("rounding mode ", round_mode_name(mode), " is not an nGraph mode");
  auto fn = select_isa(&scalar::quantize_run, &avx2::quantize_run, &avx512::quantize_run);
  const int64_t rs = static_cast<int64_t>(real_type_size(rt));
  const int64_t qs = static_cast<int64_t>(quant_type_size(qt));
  const char* xb = static_cast<const char*>(x);
  const char* sb = static_cast<const char*>(scale);
  const char* zb = static_cast<const char*>(zero_point);
  char* yb = static_cast<char*>(y);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    fn(rt, qt, xb + offs[0] * rs, sb + offs[1] * rs, zb + offs[1] * qs, st[1] != 0, yb + o * qs, n, mode);
  });
}

}  // namespace ortquant::ngraph
