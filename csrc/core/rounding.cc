#include "core/rounding.h"

#include <cctype>
#include <type_traits>

#include "core/cpu.h"

namespace ortquant {
namespace {

std::string upper(const std::string& s) {
  std::string r;
  for (char c : s) r.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return r;
}

}  // namespace

bool parse_qonnx_round_mode(const std::string& name, RoundMode* out) {
  const std::string n = upper(name);
  if (n == "ROUND" || n == "HALF_EVEN") *out = RoundMode::kHalfEven;
  else if (n == "CEIL") *out = RoundMode::kCeil;
  else if (n == "FLOOR") *out = RoundMode::kFloor;
  else if (n == "UP") *out = RoundMode::kQonnxUp;
  else if (n == "DOWN" || n == "ROUND_TO_ZERO") *out = RoundMode::kTowardZero;
  else if (n == "HALF_UP") *out = RoundMode::kQonnxHalfUp;
  else if (n == "HALF_DOWN") *out = RoundMode::kQonnxHalfDown;
  else return false;
  return true;
}

bool parse_ngraph_round_mode(const std::string& name, RoundMode* out) {
  const std::string n = upper(name);
  if (n == "ROUND_NEAREST_TOWARD_INFINITY") *out = RoundMode::kHalfAway;
  else if (n == "ROUND_NEAREST_TOWARD_ZERO") *out = RoundMode::kHalfTowardZero;
  else if (n == "ROUND_NEAREST_UPWARD") *out = RoundMode::kHalfUp;
  else if (n == "ROUND_NEAREST_DOWNWARD") *out = RoundMode::kHalfDown;
  else if (n == "ROUND_NEAREST_TOWARD_EVEN") *out = RoundMode::kHalfEven;
  else if (n == "ROUND_TOWARD_INFINITY") *out = RoundMode::kAwayFromZero;
  else if (n == "ROUND_TOWARD_ZERO") *out = RoundMode::kTowardZero;
  else if (n == "ROUND_UP") *out = RoundMode::kCeil;
  else if (n == "ROUND_DOWN") *out = RoundMode::kFloor;
  else return false;
  return true;
}

const char* round_mode_name(RoundMode mode) {
  switch (mode) {
    case RoundMode::kHalfEven: return "half_even";
    case RoundMode::kHalfAway: return "half_away_from_zero";
    case RoundMode::kHalfTowardZero: return "half_toward_zero";
    case RoundMode::kHalfUp: return "half_up";
    case RoundMode::kHalfDown: return "half_down";
    case RoundMode::kCeil: return "ceil";
    case RoundMode::kFloor: return "floor";
    case RoundMode::kTowardZero: return "toward_zero";
    case RoundMode::kAwayFromZero: return "away_from_zero";
    case RoundMode::kQonnxHalfUp: return "qonnx_half_up";
    case RoundMode::kQonnxHalfDown: return "qonnx_half_down";
    case RoundMode::kQonnxUp: return "qonnx_up";
  }
  return "unknown";
}

template <class T>
T round_value(RoundMode mode, T x) {
  return dispatch_round_mode(mode, [x](auto m) { return round_value<decltype(m)::value>(x); });
}
template float round_value<float>(RoundMode, float);
template double round_value<double>(RoundMode, double);

}  // namespace ortquant
