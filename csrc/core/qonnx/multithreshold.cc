#include "core/qonnx/multithreshold.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/qonnx/multithreshold_kernels.h"

namespace ortquant::qonnx {

ThresholdTable prepare_thresholds(const float* thresholds, int64_t channels, int64_t count) {
  if (channels < 0) throw_error("thresholds must have a non-negative number of rows");
  if (count < 0 || count >= (int64_t{1} << 30)) throw_error("thresholds must have fewer than 2^30 columns, got ", count);
  ThresholdTable t;
  t.channels = channels;
  int64_t most = 0;
  for (int64_t c = 0; c < channels; ++c) {
    int64_t n = 0;
    for (int64_t j = 0; j < count; ++j) n += std::isnan(thresholds[c * count + j]) ? 0 : 1;
    most = std::max(most, n);
  }
  while (t.width <= most) {
    t.width <<= 1;
    ++t.steps;
  }
  t.sorted.assign(static_cast<size_t>(channels * t.width), std::numeric_limits<float>::quiet_NaN());
  for (int64_t c = 0; c < channels; ++c) {
    float* row = t.sorted.data() + c * t.width;
    int64_t n = 0;
    for (int64_t j = 0; j < count; ++j) {
      const float v = thresholds[c * count + j];
      if (!std::isnan(v)) row[n++] = v;
    }
    // -0 and +0 compare equal, and x >= -0 iff x >= +0, so their relative order does not matter.
    std::sort(row, row + n);
  }
  t.heap_levels = t.steps < 8 ? t.steps : 8;
  t.heap_stride = int64_t{1} << t.heap_levels;
  t.heap.assign(static_cast<size_t>(channels * t.heap_stride), 0.f);
  for (int64_t c = 0; c < channels; ++c)
    for (int level = 0; level < t.heap_levels; ++level)
      for (int64_t i = 0; i < (int64_t{1} << level); ++i)
        t.heap[c * t.heap_stride + (int64_t{1} << level) - 1 + i] =
            t.sorted[c * t.width + (2 * i + 1) * (t.width >> (level + 1)) - 1];
  t.top_steps = t.steps < 4 ? t.steps : 4;
  t.top_stride = channels + 15;
  const int64_t nodes = (int64_t{1} << t.top_steps) - 1;
  const int64_t group = t.width >> t.top_steps;
  t.top.resize(static_cast<size_t>(nodes * t.top_stride));
  for (int64_t k = 1; k <= nodes; ++k)
    for (int64_t j = 0; j < t.top_stride && channels > 0; ++j)
      t.top[(k - 1) * t.top_stride + j] = t.sorted[(j % channels) * t.width + k * group - 1];
  return t;
}

void multithreshold(const ThresholdTable& table, const ThresholdView& view, const float* x, float* y, int64_t begin,
                    int64_t end, float out_scale, float out_bias) {
  if (begin >= end) return;
  using Fixed = void (*)(const ThresholdTable&, int64_t, const float*, float*, int64_t, float, float);
  using Cyclic = void (*)(const ThresholdTable&, int64_t, const float*, float*, int64_t, float, float);
  Fixed fixed = select_isa<Fixed>(&scalar::multithreshold_fixed, &avx2::multithreshold_fixed,
                                  &avx512::multithreshold_fixed);
  Cyclic cyclic = select_isa<Cyclic>(&scalar::multithreshold_cyclic, &avx2::multithreshold_cyclic,
                                     &avx512::multithreshold_cyclic);
  // Lane indices of the vector paths are int32.
  if (table.channels * table.width >= (int64_t{1} << 31)) {
    fixed = &scalar::multithreshold_fixed;
    cyclic = &scalar::multithreshold_cyclic;
  }
  if (table.channels == 1) {
    fixed(table, 0, x + begin, y + begin, end - begin, out_scale, out_bias);
    return;
  }
  if (view.inner == 1) {
    const int64_t channels = view.channels;
    // Deep searches on channels-last data gather per lane; instead transpose blocks of whole pixels to
    // channel-major scratch and search each channel's run with its row in registers.
    const bool transpose = fixed != &scalar::multithreshold_fixed && table.steps > table.top_steps && channels >= 4 &&
                           end - begin >= 4 * channels;
    if (!transpose) {
      cyclic(table, begin % channels, x + begin, y + begin, end - begin, out_scale, out_bias);
      return;
    }
    const int64_t head = std::min(end, (begin + channels - 1) / channels * channels);
    cyclic(table, begin % channels, x + begin, y + begin, head - begin, out_scale, out_bias);
    const int64_t pixels = (end - head) / channels;
    constexpr int64_t kBlock = 64;
    std::vector<float> scratch(static_cast<size_t>(2 * kBlock * channels));
    float* in = scratch.data();
    float* out = in + kBlock * channels;
    for (int64_t p0 = 0; p0 < pixels; p0 += kBlock) {
      const int64_t nb = std::min(kBlock, pixels - p0);
      const float* xb = x + head + p0 * channels;
      float* yb = y + head + p0 * channels;
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t c = 0; c < channels; ++c) in[c * kBlock + j] = xb[j * channels + c];
      for (int64_t c = 0; c < channels; ++c)
        fixed(table, c, in + c * kBlock, out + c * kBlock, nb, out_scale, out_bias);
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t c = 0; c < channels; ++c) yb[j * channels + c] = out[c * kBlock + j];
    }
    const int64_t tail = head + pixels * channels;
    cyclic(table, 0, x + tail, y + tail, end - tail, out_scale, out_bias);
    return;
  }
  int64_t pos = begin;
  while (pos < end) {
    const int64_t run = pos / view.inner;
    const int64_t stop = std::min(end, (run + 1) * view.inner);
    const int64_t c = run % view.channels;
    fixed(table, c, x + pos, y + pos, stop - pos, out_scale, out_bias);
    pos = stop;
  }
}

}  // namespace ortquant::qonnx
