// QONNX MultiThreshold (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 5, decision 8.
//   y = out_scale * count_t[x >= thr[c, t]] + out_bias      (float32: fl(fl(count * out_scale) + out_bias))
// count is the number of thresholds of x's channel that x is greater than or equal to: NaN x counts 0, +inf
// counts every non-NaN threshold, a NaN threshold is never counted.
//
// Speed: the count does not depend on the order of the thresholds, so each channel's thresholds are prepared
// once (NaN dropped, sorted ascending, padded with NaN to a power of two P) and every element is placed by a
// branchless binary search of log2(P) steps. The predicate x >= t[i] is true on a prefix of the padded row
// (NaN padding compares false), so the search returns exactly the count for every input, NaN and +-inf included.
#pragma once
#include <cstdint>
#include <vector>

namespace ortquant::qonnx {

// The thresholds of every channel, prepared for the search. Immutable once built.
struct ThresholdTable {
  int64_t channels = 0;       // rows of the thresholds input: C or 1 (global)
  int64_t width = 1;          // P: a power of two greater than the largest per-channel count of non-NaN thresholds
  int steps = 0;              // log2(P)
  std::vector<float> sorted;  // channels * P: ascending non-NaN thresholds, then NaN
  // For the vector paths, the first `heap_levels` = min(steps, 8) levels of every row's search in level order
  // (a binary heap): node i of level L at heap[c * heap_stride + 2^L - 1 + i] = sorted[c * P + (2i + 1) * (P >> (L + 1)) - 1].
  int heap_levels = 0;
  int64_t heap_stride = 1;
  std::vector<float> heap;
  // For the vector paths on channels-last data (a different channel in every lane): the first `top_steps` =
  // min(steps, 4) levels as rows that lanes of consecutive channels load directly:
  // top[(k - 1) * top_stride + j] = sorted[(j % channels) * P + k * (P >> top_steps) - 1], k = 1 .. 2^top_steps - 1,
  // j = 0 .. channels + 14 (channel indices wrap, so 16 lanes starting at any channel read one row).
  int top_steps = 0;
  int64_t top_stride = 0;
  std::vector<float> top;
};

// Builds the table from a (channels, count) row-major threshold matrix.
ThresholdTable prepare_thresholds(const float* thresholds, int64_t channels, int64_t count);

// The input viewed as (outer, channels, inner): element i has channel (i / inner) % channels. Channels-first
// data has inner = product of the dims after axis 1; channels-last data has inner = 1. Global thresholds
// (table.channels == 1) may use any view. Computes the flat element range [begin, end).
struct ThresholdView {
  int64_t channels = 1;
  int64_t inner = 1;
};

void multithreshold(const ThresholdTable& table, const ThresholdView& view, const float* x, float* y, int64_t begin,
                    int64_t end, float out_scale, float out_bias);

}  // namespace ortquant::qonnx
