// linger iqPad (thinker domain), spec: linger-extra.md section 5: ONNX Pad in constant mode on int8, pads in
// ONNX order [b_0 .. b_{r-1}, e_0 .. e_{r-1}] (negative pads crop), pad value from the int8 input (linger: 0).
#pragma once
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace ortquant::linger {

// Output shape; throws Error for a wrong pads length or a negative output dimension.
Shape pad_shape(const Shape& in, const std::vector<int64_t>& pads);
void iqpad(const int8_t* x, const Shape& in, const std::vector<int64_t>& pads, int8_t value, int8_t* y);

}  // namespace ortquant::linger
