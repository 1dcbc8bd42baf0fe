#include "core/ngraph/dequantize.h"

#include "core/ngraph/kernels.h"

namespace ortquant::ngraph {

void dequantize(const BroadcastPlan& plan, QuantType qt, RealType rt, const void* q, const void* scale,
                const void* zero_point, void* y, int64_t begin, int64_t end) {
  auto fn = select_isa(&scalar::dequantize_run, &avx2::dequantize_run, &avx512::dequantize_run);
  const int64_t rs = static_cast<int64_t>(real_type_size(rt));
  const int64_t qs = static_cast<int64_t>(quant_type_size(qt));
  const char* qb = static_cast<const char*>(q);
  const char* sb = static_cast<const char*>(scale);
  const char* zb = static_cast<const char*>(zero_point);
  char* yb = static_cast<char*>(y);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    fn(qt, rt, qb + offs[0] * qs, sb + offs[1] * rs, zb + offs[1] * qs, st[1] != 0, yb + o * rs, n);
  });
}

}  // namespace ortquant::ngraph
