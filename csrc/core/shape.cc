#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace ortquant {

int64_t shape_size(const Shape& s) {
  // Checked: every op's element count goes through here (a model's shape may be absurd, docs/ops.md Limits).
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw_error("negative dimension in shape ", shape_str(s));
    if (__builtin_mul_overflow(n, d, &n)) throw_error("the element count of shape ", shape_str(s), " overflows int64");
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t o = rank - s.size() + i;
      const int64_t d = s[i];
      if (d < 0) throw_error("negative dimension in shape ", shape_str(s));
      if (out[o] == 1) {
        out[o] = d;
      } else if (d != 1 && d != out[o]) {
        std::ostringstream os;
        os << "shapes";
        for (const auto& t : shapes) os << " " << shape_str(t);
        os << " cannot be broadcast together";
        throw Error(os.str());
      }
    }
  }
  return out;
}

BroadcastPlan make_broadcast_plan(const Shape& out, const std::vector<Shape>& inputs) {
  if (inputs.size() > 16) throw_error("too many broadcast inputs");
  const size_t k = inputs.size();
  const size_t rank = out.size();
  // Per input, per output dim: does the input vary along it (its dim equals the output dim and is not 1)?
  std::vector<std::vector<bool>> varies(k, std::vector<bool>(rank, false));
  for (size_t i = 0; i < k; ++i) {
    const Shape& s = inputs[i];
    if (s.size() > rank) throw_error("input rank ", s.size(), " exceeds output rank ", rank);
    for (size_t d = 0; d < s.size(); ++d) {
      const size_t o = rank - s.size() + d;
      if (s[d] != 1 && s[d] != out[o]) throw_error("shape ", shape_str(s), " does not broadcast to ", shape_str(out));
      varies[i][o] = s[d] != 1;
    }
  }
  // Collapse: drop output dims of size 1, merge neighbours whose "varies" pattern is the same for every input.
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> pat;  // per collapsed dim, per input
  for (size_t o = 0; o < rank; ++o) {
    if (out[o] == 1) continue;
    std::vector<bool> p(k);
    for (size_t i = 0; i < k; ++i) p[i] = varies[i][o];
    if (!dims.empty() && pat.back() == p) {
      dims.back() *= out[o];
    } else {
      dims.push_back(out[o]);
      pat.push_back(p);
    }
  }
  BroadcastPlan plan;
  plan.total = shape_size(out);
  plan.inner_stride.assign(k, 0);
  plan.outer_strides.assign(k, {});
  if (dims.empty()) {  // scalar output or all-ones
    plan.inner = plan.total;  // 0 or 1
    if (plan.inner == 0) plan.inner = 1;
    for (size_t i = 0; i < k; ++i) plan.inner_stride[i] = 0;
    return plan;
  }
  // Element strides of each input along collapsed dims (contiguous input, varying dims only).
  const size_t nd = dims.size();
  std::vector<std::vector<int64_t>> strides(k, std::vector<int64_t>(nd, 0));
  for (size_t i = 0; i < k; ++i) {
    int64_t st = 1;
    for (size_t d = nd; d-- > 0;) {
      if (pat[d][i]) {
        strides[i][d] = st;
        st *= dims[d];
      }
    }
  }
  plan.inner = dims.back();
  for (size_t i = 0; i < k; ++i) plan.inner_stride[i] = strides[i][nd - 1];
  plan.outer_dims.assign(dims.begin(), dims.end() - 1);
  for (size_t i = 0; i < k; ++i) plan.outer_strides[i].assign(strides[i].begin(), strides[i].end() - 1);
  return plan;
}

void BroadcastPlan::row_offsets(int64_t row, int64_t* offs) const {
  const size_t k = inner_stride.size();
  for (size_t i = 0; i < k; ++i) offs[i] = 0;
  for (size_t d = outer_dims.size(); d-- > 0;) {
    const int64_t idx = row % outer_dims[d];
    row /= outer_dims[d];
    for (size_t i = 0; i < k; ++i) offs[i] += idx * outer_strides[i][d];
  }
}

}  // namespace ortquant
