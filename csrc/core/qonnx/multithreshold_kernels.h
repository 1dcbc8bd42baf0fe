// Per-ISA entry points of the MultiThreshold search loops (see core/isa.h and multithreshold.h).
#pragma once
#include <cstdint>

#include "core/isa.h"
#include "core/qonnx/multithreshold.h"

namespace ortquant::qonnx {

// Count of thresholds <= x in one prepared row (ascending, NaN-padded to 2^steps entries): a branchless
// binary search. Shared by the scalar path and the tails of the vector paths.
inline int32_t threshold_search(const float* row, int steps, float x) {
  int32_t pos = 0;
  for (int s = steps - 1; s >= 0; --s) {
    const int32_t step = int32_t{1} << s;
    pos += (x >= row[pos + step - 1]) ? step : 0;
  }
  return pos;
}

// fixed: every element of x uses row `channel` of the table.
// cyclic: element i uses row (c0 + i) % table.channels, 0 <= c0 < table.channels; the caller guarantees
// channels * width < 2^31 so lane indices fit in int32.
ORTQUANT_DECLARE_ISA_FN(void, multithreshold_fixed,
                        (const ThresholdTable& table, int64_t channel, const float* x, float* y, int64_t n, float scale,
                         float bias))
ORTQUANT_DECLARE_ISA_FN(void, multithreshold_cyclic,
                        (const ThresholdTable& table, int64_t c0, const float* x, float* y, int64_t n, float scale,
                         float bias))

}  // namespace ortquant::qonnx
