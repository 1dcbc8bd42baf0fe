// Integer mode's fused residual add (QConv's optional input R): y = float32(y + r), then y < 0 ? 0 : y with relu,
// on one image's output while it is in cache. The same float32 additions (and Relu) as onnxruntime's Add and Relu
// nodes it replaces.
#pragma once
#include <cstdint>

namespace ortquant::integer {

// y[i] = y[i] + r[i] (float32), then with relu y[i] < 0 ? 0 : y[i], for i < n.
void add_residual(float* y, const float* r, int64_t n, bool relu);

}  // namespace ortquant::integer
