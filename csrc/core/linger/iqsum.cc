#include "core/linger/iqsum.h"

#include <algorithm>

#include "core/error.h"

namespace ortquant::linger {

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (size_t i = 0; i < rank; ++i) out.push_back(static_cast<int64_t>(i));
    return out;
  }
  const int64_t r = static_cast<int64_t>(rank);
  for (int64_t a : axes) {
    const int64_t n = a < 0 ? a + r : a;
    if (n < 0 || n >= r) throw_error("axis ", a, " is out of range for rank ", rank);
    if (std::find(out.begin(), out.end(), n) != out.end()) throw_error("axis ", a, " is given twice");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool red = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!red) out.push_back(in[i]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

void iqsum(const int8_t* x, const Shape& in, const std::vector<int64_t>& axes, int8_t* y, const luna::Rescale& r) {
  // Output strides per input axis (0 for reduced axes), then one pass over the input with an index counter.
  const size_t rank = in.size();
  if (rank == 0) {
    y[0] = luna::saturate_to<int8_t>(r(x[0]));
    return;
  }
  std::vector<int64_t> ostride(rank, 0);
  int64_t st = 1, out_n = 1;
  for (size_t i = rank; i-- > 0;) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) {
      ostride[i] = st;
      st *= in[i];
      out_n *= in[i];
    }
  }
  std::vector<int64_t> acc(static_cast<size_t>(out_n), 0);
  const int64_t total = shape_size(in);
  if (total > 0) {
    std::vector<int64_t> idx(rank, 0);
    const int64_t inner = in[rank - 1];
    const int64_t inner_st = ostride[rank - 1];
    int64_t o = 0;  // output offset of the current row start
    for (int64_t base = 0; base < total; base += inner) {
      const int8_t* row = x + base;
      if (inner_st == 0) {
        int64_t s = 0;
        for (int64_t j = 0; j < inner; ++j) s += row[j];
        acc[static_cast<size_t>(o)] += s;
      } else {
        int64_t* a = acc.data() + o;
        for (int64_t j = 0; j < inner; ++j) a[j] += row[j];
      }
      // Advance the index over the outer axes (rank - 1 .. 0, skipping the innermost).
      for (size_t d = rank - 1; d-- > 0;) {
        o += ostride[d];
        if (++idx[d] < in[d]) break;
        o -= ostride[d] * in[d];
        idx[d] = 0;
      }
    }
  }
  for (int64_t i = 0; i < out_n; ++i) y[i] = luna::saturate_to<int8_t>(r(acc[static_cast<size_t>(i)]));
}

}  // namespace ortquant::linger
