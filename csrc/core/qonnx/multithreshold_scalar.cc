// MultiThreshold loops of the scalar path: the oracle the vector paths are tested against (no vectorization).
#include "core/qonnx/multithreshold_kernels.h"

namespace ortquant::qonnx::scalar {

void multithreshold_fixed(const ThresholdTable& table, int64_t channel, const float* x, float* y, int64_t n, float scale,
                          float bias) {
  const float* row = table.sorted.data() + channel * table.width;
  for (int64_t i = 0; i < n; ++i) {
    const float c = static_cast<float>(threshold_search(row, table.steps, x[i]));
    const float scaled = c * scale;
    y[i] = scaled + bias;
  }
}

void multithreshold_cyclic(const ThresholdTable& table, int64_t c0, const float* x, float* y, int64_t n, float scale,
                           float bias) {
  const int64_t channels = table.channels;
  int64_t c = c0;
  for (int64_t i = 0; i < n; ++i) {
    const float cnt = static_cast<float>(threshold_search(table.sorted.data() + c * table.width, table.steps, x[i]));
    const float scaled = cnt * scale;
    y[i] = scaled + bias;
    if (++c == channels) c = 0;
  }
}

}  // namespace ortquant::qonnx::scalar
