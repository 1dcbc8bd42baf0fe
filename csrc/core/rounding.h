// The rounding engine shared by every op family (QONNX, nGraph, linger).
//
// Nine primitive modes with exact semantics (no float artefacts), plus three "QONNX formula" modes that
// reproduce numpy float32 expressions of qonnx bit for bit (decision 5): HALF_UP = sign(x)*floor(|x|+0.5),
// HALF_DOWN = sign(x)*ceil(|x|-0.5), UP = sign(x)*ceil(|x|), with numpy's sign (sign(+-0) = +0, sign(NaN) = NaN).
// Each op composes its own order of operations around round_value().
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

namespace ortquant {

enum class RoundMode : uint8_t {
  kHalfEven = 0,        // nearest, ties to even           (QONNX ROUND/HALF_EVEN, nGraph ROUND_NEAREST_TOWARD_EVEN)
  kHalfAway,            // nearest, ties away from zero    (nGraph ROUND_NEAREST_TOWARD_INFINITY)
  kHalfTowardZero,      // nearest, ties toward zero       (nGraph ROUND_NEAREST_TOWARD_ZERO)
  kHalfUp,              // nearest, ties toward +inf       (nGraph ROUND_NEAREST_UPWARD; linger luna_quant)
  kHalfDown,            // nearest, ties toward -inf       (nGraph ROUND_NEAREST_DOWNWARD)
  kCeil,                // toward +inf                     (QONNX CEIL, nGraph ROUND_UP)
  kFloor,               // toward -inf                     (QONNX FLOOR, nGraph ROUND_DOWN)
  kTowardZero,          // truncate                        (QONNX DOWN/ROUND_TO_ZERO, nGraph ROUND_TOWARD_ZERO)
  kAwayFromZero,        // away from zero                  (nGraph ROUND_TOWARD_INFINITY)
  kQonnxHalfUp,         // QONNX HALF_UP:   sign(x)*floor(|x|+0.5) in the input precision
  kQonnxHalfDown,       // QONNX HALF_DOWN: sign(x)*ceil(|x|-0.5) in the input precision
  kQonnxUp,             // QONNX UP:        sign(x)*ceil(|x|)
};

constexpr int kNumRoundModes = 12;

// Names: QONNX (ROUND, HALF_EVEN, CEIL, FLOOR, UP, DOWN, HALF_UP, HALF_DOWN, plus ROUND_TO_ZERO = DOWN),
// case-insensitive. Returns false for an unknown name.
bool parse_qonnx_round_mode(const std::string& name, RoundMode* out);
// nGraph names (ROUND_NEAREST_TOWARD_INFINITY, ..., ROUND_DOWN), case-insensitive; exact primitives.
bool parse_ngraph_round_mode(const std::string& name, RoundMode* out);
const char* round_mode_name(RoundMode mode);

namespace detail {
template <class T>
[[gnu::always_inline]] inline T numpy_sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : (x == T(0) ? T(0) : x));
}
}  // namespace detail

// Rounds x by the mode given as a template argument (lets loops vectorize with the mode hoisted out).
// The exact modes work from t = trunc(x) and d = x - t, which is exact in binary floating point.
// Always inlined: an out-of-line copy would be a weak symbol emitted by every per-ISA file with that file's flags,
// and the linker could hand the AVX-512 copy to the scalar path.
template <RoundMode M, class T>
[[gnu::always_inline]] inline T round_value(T x) {
  if constexpr (M == RoundMode::kHalfEven) {
    return std::nearbyint(x);
  } else if constexpr (M == RoundMode::kCeil) {
    return std::ceil(x);
  } else if constexpr (M == RoundMode::kFloor) {
    return std::floor(x);
  } else if constexpr (M == RoundMode::kTowardZero) {
    return std::trunc(x);
  } else if constexpr (M == RoundMode::kAwayFromZero) {
    const T t = std::trunc(x);
    return t != x ? t + std::copysign(T(1), x) : t;
  } else if constexpr (M == RoundMode::kHalfAway) {
    const T t = std::trunc(x);
    const T d = x - t;
    return std::fabs(d) >= T(0.5) ? t + std::copysign(T(1), x) : t;
  } else if constexpr (M == RoundMode::kHalfTowardZero) {
    const T t = std::trunc(x);
    const T d = x - t;
    return std::fabs(d) > T(0.5) ? t + std::copysign(T(1), x) : t;
  } else if constexpr (M == RoundMode::kHalfUp) {
    const T t = std::trunc(x);
    const T d = x - t;
    return d >= T(0.5) ? t + T(1) : (d < T(-0.5) ? t - T(1) : t);
  } else if constexpr (M == RoundMode::kHalfDown) {
    const T t = std::trunc(x);
    const T d = x - t;
    return d > T(0.5) ? t + T(1) : (d <= T(-0.5) ? t - T(1) : t);
  } else if constexpr (M == RoundMode::kQonnxHalfUp) {
    return detail::numpy_sign(x) * std::floor(std::fabs(x) + T(0.5));
  } else if constexpr (M == RoundMode::kQonnxHalfDown) {
    return detail::numpy_sign(x) * std::ceil(std::fabs(x) - T(0.5));
  } else {
    static_assert(M == RoundMode::kQonnxUp, "unhandled rounding mode");
    return detail::numpy_sign(x) * std::ceil(std::fabs(x));
  }
}

// Run-time mode (scalar; for per-element work prefer dispatch_round_mode around a loop).
template <class T>
T round_value(RoundMode mode, T x);

// Calls f(std::integral_constant<RoundMode, M>{}) for the run-time mode, so kernels instantiate per mode.
template <class F>
inline decltype(auto) dispatch_round_mode(RoundMode mode, F&& f) {
#define ORTQUANT_ROUND_CASE(M) \
  case RoundMode::M:           \
    return f(std::integral_constant<RoundMode, RoundMode::M>{});
  switch (mode) {
    ORTQUANT_ROUND_CASE(kHalfEven)
    ORTQUANT_ROUND_CASE(kHalfAway)
    ORTQUANT_ROUND_CASE(kHalfTowardZero)
    ORTQUANT_ROUND_CASE(kHalfUp)
    ORTQUANT_ROUND_CASE(kHalfDown)
    ORTQUANT_ROUND_CASE(kCeil)
    ORTQUANT_ROUND_CASE(kFloor)
    ORTQUANT_ROUND_CASE(kTowardZero)
    ORTQUANT_ROUND_CASE(kAwayFromZero)
    ORTQUANT_ROUND_CASE(kQonnxHalfUp)
    ORTQUANT_ROUND_CASE(kQonnxHalfDown)
    case RoundMode::kQonnxUp:
      break;
  }
#undef ORTQUANT_ROUND_CASE
  return f(std::integral_constant<RoundMode, RoundMode::kQonnxUp>{});
}

// Rounds n floats (dispatched to the active ISA path). In-place allowed.
void round_array(RoundMode mode, const float* x, float* y, int64_t n);

}  // namespace ortquant
