// Shapes and numpy-style broadcasting of parameter tensors.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checked.h"

namespace ortquant {

using Shape = std::vector<int64_t>;

// Element count; throws Error on a negative dim or int64 overflow (checked: shapes come from models).
int64_t shape_size(const Shape& s);
std::string shape_str(const Shape& s);
// numpy broadcast of several shapes; throws Error naming the shapes when they do not broadcast.
Shape broadcast_shapes(const std::vector<Shape>& shapes);

// Iteration plan for an elementwise op whose inputs broadcast to `out`. Dimensions are collapsed where
// possible; the innermost run of `inner` output elements has, per input, stride 0 (broadcast) or 1.
struct BroadcastPlan {
  int64_t total = 0;                       // output elements
  int64_t inner = 1;                       // length of a row (innermost collapsed dim)
  std::vector<int64_t> outer_dims;         // collapsed outer dims, outermost first
  std::vector<std::vector<int64_t>> outer_strides;  // per input, element strides for outer_dims
  std::vector<int64_t> inner_stride;       // per input: 0 or 1

  // Element offset of input k at the start of row `row`.
  void row_offsets(int64_t row, int64_t* offs) const;
};

BroadcastPlan make_broadcast_plan(const Shape& out, const std::vector<Shape>& inputs);

// Visits the flat output range [begin, end) as row segments: fn(out_offset, in_offsets, length, in_strides).
template <class Fn>
void for_each_segment(const BroadcastPlan& p, int64_t begin, int64_t end, Fn&& fn) {
  const size_t k = p.inner_stride.size();
  int64_t offs[16];
  int64_t strides[16];
  for (size_t i = 0; i < k; ++i) strides[i] = p.inner_stride[i];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t row = pos / p.inner;
    const int64_t col = pos - row * p.inner;
    const int64_t len = std::min(p.inner - col, end - pos);
    p.row_offsets(row, offs);
    for (size_t i = 0; i < k; ++i) offs[i] += col * strides[i];
    fn(pos, static_cast<const int64_t*>(offs), len, static_cast<const int64_t*>(strides));
    pos += len;
  }
}

}  // namespace ortquant
