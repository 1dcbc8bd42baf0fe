#include "core/linger/iqpad.h"

#include <cstring>

#include "core/error.h"

namespace ortquant::linger {

Shape pad_shape(const Shape& in, const std::vector<int64_t>& pads) {
  const size_t r = in.size();
  if (pads.size() != 2 * r)
    throw_error("pads must have 2 * rank = ", 2 * r, " values, got ", pads.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    for (int64_t p : {pads[i], pads[i + r]})
      if (p < -kMaxGeometry || p > kMaxGeometry)
        throw_error("input pads value ", p, " on axis ", i, " is outside [", -kMaxGeometry, ", ", kMaxGeometry,
                    "] (limit, docs/ops.md)");
    out[i] = checked_add(checked_add(in[i], pads[i], "padded size"), pads[i + r], "padded size");
    if (out[i] < 0) throw_error("pads ", pads[i], ", ", pads[i + r], " give a negative size on axis ", i);
  }
  return out;
}

namespace {

// Copies the kept part of axis d and recurses; out-of-range positions were pre-filled with the pad value.
void copy_axis(const int8_t* x, const Shape& in, const Shape& out, const std::vector<int64_t>& pads,
               const std::vector<int64_t>& in_st, const std::vector<int64_t>& out_st, size_t d, int8_t* y) {
  const size_t r = in.size();
  const int64_t b = pads[d];
  // Output position o maps to input position o - b.
  const int64_t o0 = b > 0 ? b : 0;
  const int64_t i0 = b > 0 ? 0 : -b;
  int64_t len = in[d] - i0;
  if (o0 + len > out[d]) len = out[d] - o0;
  if (len <= 0) return;
  if (d + 1 == r) {
    std::memcpy(y + o0, x + i0, static_cast<size_t>(len));
    return;
  }
  for (int64_t k = 0; k < len; ++k)
    copy_axis(x + (i0 + k) * in_st[d], in, out, pads, in_st, out_st, d + 1, y + (o0 + k) * out_st[d]);
}

}  // namespace

void iqpad(const int8_t* x, const Shape& in, const std::vector<int64_t>& pads, int8_t value, int8_t* y) {
  const Shape out = pad_shape(in, pads);
  const int64_t n_out = shape_size(out);
  if (n_out == 0) return;
  std::memset(y, static_cast<unsigned char>(value), static_cast<size_t>(n_out));
  if (in.empty()) {
    y[0] = x[0];
    return;
  }
  if (shape_size(in) == 0) return;
  const size_t r = in.size();
  std::vector<int64_t> in_st(r, 1), out_st(r, 1);
  for (size_t i = r - 1; i-- > 0;) {
    in_st[i] = in_st[i + 1] * in[i + 1];
    out_st[i] = out_st[i + 1] * out[i + 1];
  }
  copy_axis(x, in, out, pads, in_st, out_st, 0, y);
}

}  // namespace ortquant::linger
