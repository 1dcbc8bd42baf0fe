#include "core/ngraph/params.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace ortquant::ngraph {
namespace {

std::string lower(const std::string& s) {
  std::string r;
  for (char c : s) r.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return r;
}

std::string axes_str(const std::vector<int64_t>& axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

}  // namespace

const char* quant_type_name(QuantType t) {
  switch (t) {
    case QuantType::kInt8: return "int8";
    case QuantType::kUInt8: return "uint8";
    case QuantType::kInt16: return "int16";
    case QuantType::kUInt16: return "uint16";
    case QuantType::kInt32: return "int32";
  }
  return "unknown";
}

const char* real_type_name(RealType t) { return t == RealType::kFloat32 ? "float32" : "float16"; }

size_t quant_type_size(QuantType t) {
  switch (t) {
    case QuantType::kInt8:
    case QuantType::kUInt8: return 1;
    case QuantType::kInt16:
    case QuantType::kUInt16: return 2;
    case QuantType::kInt32: return 4;
  }
  return 0;
}

size_t real_type_size(RealType t) { return t == RealType::kFloat32 ? 4 : 2; }

bool parse_quant_type(const std::string& name, QuantType* out) {
  const std::string n = lower(name);
  if (n == "i8" || n == "int8" || n == "int8_t") *out = QuantType::kInt8;
  else if (n == "u8" || n == "uint8" || n == "uint8_t") *out = QuantType::kUInt8;
  else if (n == "i16" || n == "int16" || n == "int16_t") *out = QuantType::kInt16;
  else if (n == "u16" || n == "uint16" || n == "uint16_t") *out = QuantType::kUInt16;
  else if (n == "i32" || n == "int32" || n == "int32_t") *out = QuantType::kInt32;
  else return false;
  return true;
}

bool parse_real_type(const std::string& name, RealType* out) {
  const std::string n = lower(name);
  if (n == "f32" || n == "float32" || n == "float") *out = RealType::kFloat32;
  else if (n == "f16" || n == "float16" || n == "half") *out = RealType::kFloat16;
  else return false;
  return true;
}

bool quant_type_from_onnx(int64_t t, QuantType* out) {
  switch (t) {
    case 3: *out = QuantType::kInt8; return true;
    case 2: *out = QuantType::kUInt8; return true;
    case 5: *out = QuantType::kInt16; return true;
    case 4: *out = QuantType::kUInt16; return true;
    case 6: *out = QuantType::kInt32; return true;
    default: return false;
  }
}

bool real_type_from_onnx(int64_t t, RealType* out) {
  switch (t) {
    case 1: *out = RealType::kFloat32; return true;
    case 10: *out = RealType::kFloat16; return true;
    default: return false;
  }
}

void check_axes(const std::vector<int64_t>& axes) {
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = i + 1; j < axes.size(); ++j)
      if (axes[i] == axes[j]) throw_error("attribute 'axes' ", axes_str(axes), " repeats axis ", axes[i]);
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    if (a < -r || a >= r)
      throw_error("attribute 'axes' ", axes_str(axes), ": axis ", a, " is out of range for an input of rank ", r);
    out.push_back(a < 0 ? a + r : a);
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i] == out[i - 1])
      throw_error("attribute 'axes' ", axes_str(axes), " names axis ", out[i], " twice for an input of rank ", r);
  return out;
}

Shape param_shape(const Shape& input, const std::vector<int64_t>& sorted_axes, const Shape& scale,
                  const Shape& zero_point) {
  Shape p(input.size(), 1);
  if (sorted_axes.empty()) {
    if (shape_size(scale) != 1 || shape_size(zero_point) != 1)
      throw_error("with empty 'axes' (per-tensor) scale and zero_point must have one element each, got shapes ",
                  shape_str(scale), " and ", shape_str(zero_point));
    return p;
  }
  Shape want;
  for (int64_t a : sorted_axes) {
    want.push_back(input[static_cast<size_t>(a)]);
    p[static_cast<size_t>(a)] = input[static_cast<size_t>(a)];
  }
  if (scale != want || zero_point != want)
    throw_error("scale and zero_point must both have shape ", shape_str(want), " (the input dims at axes ",
                axes_str(sorted_axes), " of input shape ", shape_str(input), "), got ", shape_str(scale), " and ",
                shape_str(zero_point));
  return p;
}

}  // namespace ortquant::ngraph
