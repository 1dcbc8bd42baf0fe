#include "core/qonnx/bipolar_quant.h"

#include "core/qonnx/bipolar_quant_kernels.h"

namespace ortquant::qonnx {

void bipolar_quant(const BroadcastPlan& plan, const float* x, const float* s, float* y, int64_t begin, int64_t end) {
  auto fn = select_isa(&scalar::bipolar_quant_contiguous, &avx2::bipolar_quant_contiguous,
                       &avx512::bipolar_quant_contiguous);
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    const float* xr = x + offs[0];
    const float* sr = s + offs[1];
    if (st[0] == 1) {
      fn(xr, sr, st[1], y + o, n);
    } else {  // x broadcast along the row (scale larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i) fn(xr, sr + i * st[1], 0, y + o + i, 1);
    }
  });
}

void bipolar_quant_mixed(const BroadcastPlan& plan, const void* x, bool x16, const void* s, bool s16, void* y,
                         int64_t begin, int64_t end) {
  auto fn = select_isa(&scalar::bipolar_quant_mixed_contiguous, &avx2::bipolar_quant_mixed_contiguous,
                       &avx512::bipolar_quant_mixed_contiguous);
  const int64_t xe = x16 ? 2 : 4, se = s16 ? 2 : 4, ye = x16 && s16 ? 2 : 4;
  auto X = [&](int64_t i) { return static_cast<const char*>(x) + i * xe; };
  auto S = [&](int64_t i) { return static_cast<const char*>(s) + i * se; };
  auto Y = [&](int64_t i) { return static_cast<char*>(y) + i * ye; };
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      fn(X(offs[0]), x16, S(offs[1]), s16, st[1], Y(o), n);
    } else {  // x broadcast along the row (scale larger than x): one element at a time
      for (int64_t i = 0; i < n; ++i) fn(X(offs[0]), x16, S(offs[1] + i * st[1]), s16, 0, Y(o + i), 1);
    }
  });
}

}  // namespace ortquant::qonnx
