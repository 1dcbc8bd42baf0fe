// Shapes and numpy-style broadcasting of parameter tensors.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/checked.h"

namespace ortquant {

// A tensor shape: int64 dimensions, held inline up to kInline of them (every rank the ops meet in practice), so that
// the shape arithmetic of every run (output shapes, views of onnxruntime's tensors) allocates nothing; longer ones go
// to the heap. The interface is std::vector<int64_t>'s subset the code uses, and it converts from and to one.
class Shape {
 public:
  static constexpr size_t kInline = 8;
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Shape() = default;
  explicit Shape(size_t n, int64_t v = 0) { assign(n, v); }
  Shape(std::initializer_list<int64_t> l) { assign(l.begin(), l.end()); }
  template <class It, class = decltype(*std::declval<It>())>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit, as from a vector
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { take(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      heap_.clear();
      take(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  ~Shape() = default;
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT: implicit

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const int64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& at(size_t i) {
    check(i);
    return data()[i];
  }
  const int64_t& at(size_t i) const {
    check(i);
    return data()[i];
  }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + n_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  const int64_t* cbegin() const { return data(); }
  const int64_t* cend() const { return data() + n_; }
  std::reverse_iterator<const int64_t*> rbegin() const { return std::reverse_iterator<const int64_t*>(end()); }
  std::reverse_iterator<const int64_t*> rend() const { return std::reverse_iterator<const int64_t*>(begin()); }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[n_ - 1]; }
  const int64_t& back() const { return data()[n_ - 1]; }

  void clear() { resize(0); }
  void reserve(size_t) {}
  void push_back(int64_t v) {
    resize(n_ + 1);
    back() = v;
  }
  void pop_back() { resize(n_ - 1); }
  void resize(size_t n, int64_t v = 0) {
    if (n > kInline && heap_.empty()) heap_.assign(inline_, inline_ + n_);  // leaving the inline storage
    if (!heap_.empty() || n > kInline) heap_.resize(std::max(n, kInline + 1), 0);
    int64_t* d = data();
    for (size_t i = n_; i < n; ++i) d[i] = v;
    n_ = n;
  }
  void assign(size_t n, int64_t v) {
    resize(0);
    resize(n, v);
  }
  template <class It>
  void assign(It first, It last) {  // first..last may lie in this shape: copied before anything changes
    const auto n = static_cast<size_t>(std::distance(first, last));
    if (n > kInline) {
      std::vector<int64_t> copy(first, last);
      heap_ = std::move(copy);
      n_ = n;
      return;
    }
    int64_t tmp[kInline];
    std::copy(first, last, tmp);
    heap_.clear();  // back to the inline storage
    std::copy(tmp, tmp + n, inline_);
    n_ = n;
  }
  int64_t* insert(const int64_t* pos, int64_t v) { return insert(pos, &v, &v + 1); }
  template <class It>
  int64_t* insert(const int64_t* pos, It first, It last) {
    const std::vector<int64_t> add(first, last);  // first..last may lie in this shape
    const auto at = static_cast<size_t>(pos - data());
    std::vector<int64_t> all(begin(), end());
    all.insert(all.begin() + static_cast<std::ptrdiff_t>(at), add.begin(), add.end());
    assign(all.begin(), all.end());
    return data() + at;
  }
  int64_t* erase(const int64_t* pos) { return erase(pos, pos + 1); }
  int64_t* erase(const int64_t* first, const int64_t* last) {
    const auto at = static_cast<size_t>(first - data()), k = static_cast<size_t>(last - first);
    int64_t* d = data();
    std::copy(d + at + k, d + n_, d + at);
    resize(n_ - k);
    return data() + at;
  }

  friend bool operator==(const Shape& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend bool operator==(const Shape& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const Shape& a, const std::vector<int64_t>& b) { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  size_t n_ = 0;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;  // the dimensions when there are more than kInline (then never empty)
  void take(Shape& o) noexcept {
    n_ = o.n_;
    if (o.heap_.empty()) {
      std::copy(o.inline_, o.inline_ + o.n_, inline_);
    } else {
      heap_ = std::move(o.heap_);
      o.heap_.clear();
    }
    o.n_ = 0;
  }
  void check(size_t i) const {
    if (i >= n_) throw std::out_of_range("Shape::at");
  }
};

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
