// Attribute validation shared by the structural QONNX kernels (Im2Col, MaxPoolNHWC, QuantAvgPool2d): errors name
// the attribute and what was expected; the wrapper adds the op type and node name.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "ort/op.h"

namespace ortquant::ort {

inline std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// Checks that `v` (attribute `name`) has `len` values, each in [min_value, kMaxGeometry] (the geometry limit).
inline const std::vector<int64_t>& check_ints(const std::vector<int64_t>& v, const char* name, size_t len,
                                              int64_t min_value) {
  if (v.size() != len) throw_error("attribute '", name, "' must have ", len, " values, got ", ints_str(v));
  for (int64_t x : v) {
    if (x < min_value) throw_error("attribute '", name, "' values must be >= ", min_value, ", got ", ints_str(v));
    if (x > kMaxGeometry)
      throw_error("attribute '", name, "' values must be at most ", kMaxGeometry, " (limit, docs/ops.md), got ",
                  ints_str(v));
  }
  return v;
}

// Required ints attribute of `len` values >= min_value.
inline std::vector<int64_t> required_ints(const KernelInfo& info, const char* name, size_t len, int64_t min_value) {
  return check_ints(info.attr_ints(name), name, len, min_value);
}

// Optional ints attribute of `len` values >= min_value, `dflt` when absent.
inline std::vector<int64_t> optional_ints(const KernelInfo& info, const char* name, size_t len, int64_t min_value,
                                          const std::vector<int64_t>& dflt) {
  return check_ints(info.attr_ints(name, dflt), name, len, min_value);
}

}  // namespace ortquant::ort
