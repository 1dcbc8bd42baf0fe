#include "core/linger/relu.h"

namespace ortquant::linger {

template <class T>
void relu(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}
template void relu<int8_t>(const int8_t*, int8_t*, int64_t);
template void relu<int32_t>(const int32_t*, int32_t*, int64_t);
template void relu<float>(const float*, float*, int64_t);

}  // namespace ortquant::linger
