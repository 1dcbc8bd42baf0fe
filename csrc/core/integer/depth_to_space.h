// Integer mode's fused DepthToSpace (QConv's `depth_to_space` attribute): the pixel shuffle of a QConv output,
// applied to each image's output while it is in cache.
#pragma once
#include <cstdint>

namespace ortquant::integer {

// ONNX DepthToSpace of one image x [c][h][w] (c a multiple of bs * bs) into y [c / (bs * bs)][h * bs][w * bs]:
// y[k][h * bs + i][w * bs + j] = x[src][h][w] with src = k * bs * bs + i * bs + j (crd, mode "CRD") or
// (i * bs + j) * (c / (bs * bs)) + k (mode "DCR"). Pure data movement (the same float32 values).
void depth_to_space(const float* x, int64_t c, int64_t h, int64_t w, int64_t bs, bool crd, float* y);

}  // namespace ortquant::integer
