// Parameter tensors of the QONNX elementwise ops (BipolarQuant, Trunc, FloatQuant) as the core sees them, and
// the expansion of several small parameter tensors onto their common numpy-broadcast shape. Each op turns its
// parameters once into per-element arrays over that shape (structure of arrays), so its hot loop broadcasts
// only two operands: X and the packed parameters.
#pragma once
#include <cstdint>
#include <vector>

#include "core/half.h"
#include "core/shape.h"

namespace ortquant::qonnx {

// A float32, int32 (bit widths) or float16 (is_f16, data holds the IEEE binary16 bits) tensor.
struct NumTensor {
  const void* data = nullptr;
  bool is_int32 = false;
  Shape shape;
  bool is_f16 = false;

  int64_t size() const { return shape_size(shape); }
  // The value as float32 (exact for float32 and float16; an int32 rounded to float32).
  float f32(int64_t i) const {
    if (is_int32) return static_cast<float>(static_cast<const int32_t*>(data)[i]);
    if (is_f16) return half_to_float(static_cast<const uint16_t*>(data)[i]);
    return static_cast<const float*>(data)[i];
  }
  int32_t i32(int64_t i) const { return static_cast<const int32_t*>(data)[i]; }
  // The exact value (an int32 converted exactly; a float widened).
  double f64(int64_t i) const {
    return is_int32 ? static_cast<double>(static_cast<const int32_t*>(data)[i]) : static_cast<double>(f32(i));
  }
};

inline NumTensor f32_tensor(const float* data, Shape shape) { return {data, false, std::move(shape)}; }

// Calls fn(o, idx) for every flat element o of `out`; idx[k] is the flat index of the element of inputs[k] that
// numpy broadcasting maps to it. At most 16 inputs.
template <class Fn>
void for_each_broadcast(const Shape& out, const std::vector<Shape>& inputs, Fn&& fn) {
  const BroadcastPlan plan = make_broadcast_plan(out, inputs);
  const size_t k = inputs.size();
  for_each_segment(plan, 0, plan.total, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    int64_t idx[16];
    for (int64_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < k; ++i) idx[i] = offs[i] + j * st[i];
      fn(o + j, static_cast<const int64_t*>(idx));
    }
  });
}

}  // namespace ortquant::qonnx
