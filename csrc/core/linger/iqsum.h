// linger iqSum (thinker domain), spec: linger-extra.md section 4.
//   S = sum of x over the reduced axes (exact), y = saturate8(floor(S * so/sx + 1/2)).
#pragma once
#include <cstdint>
#include <vector>

#include "core/requant.h"
#include "core/shape.h"

namespace ortquant::linger {

// Normalized, sorted, unique axes of `rank` (negative counted from the end); empty `axes` = all axes.
// Throws Error for an axis out of range or given twice.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, size_t rank);
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims);
void iqsum(const int8_t* x, const Shape& in, const std::vector<int64_t>& axes, int8_t* y, const luna::Rescale& r);

}  // namespace ortquant::linger
