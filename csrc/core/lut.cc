#include "core/lut.h"

#include <array>
#include <cstddef>

namespace ortquant::luna {

// The segment constants (linger.md; read from lingerext's .rodata, equal to thinker's libluna).
const int32_t kSigBands[17] = {0,    971,  1699, 2347,  2974,  3614,  4291,  5026, 5861,
                                   6831, 7864, 8987, 10375, 11594, 13168, 14730, 32768};
const int32_t kSigSlopes[16] = {32316, 29471, 25891, 22068, 18225, 29057, 22206, 16113,
                                    10881, 27353, 16611, 9242,  4618,  20670, 8610,  693};
const int32_t kSigBiasPos[16] = {16384, 16721, 17464, 18559, 19954, 21585, 23380, 25249,
                                     27121, 28807, 30096, 31107, 31839, 32199, 32502, 32724};
const int32_t kSigBiasNeg[16] = {16384, 16047, 15304, 14209, 12814, 11183, 9388, 7519,
                                     5647,  3961,  2672,  1661,  929,   569,   266,  44};

const int32_t kTanhBands[17] = {0,    512,  888,  1226, 1558, 1899, 2264, 2670, 3146,
                                    3734, 4297, 4761, 5466, 6151, 7193, 8093, 32768};
const int32_t kTanhSlopes[16] = {32266, 29154, 25374, 21309, 17272, 26886, 19904, 13765,
                                     8599,  19497, 12047, 7324,  3373,  26820, 5531,  337};
const int32_t kTanhBias[16] = {0,     778,   2417,  4851,  7922,  11474, 15334, 19335,
                                   23303, 26699, 28653, 30026, 31344, 31981, 32565, 32725};
// Right shift of segment j (1-based): kSigShifts[j - 1], kTanhShifts[j - 1].
const int32_t kSigShifts[16] = {13, 13, 13, 13, 13, 14, 14, 14, 14, 16, 16, 16, 16, 19, 19, 19};
const int32_t kTanhShifts[16] = {11, 11, 11, 11, 11, 12, 12, 12, 12, 14, 14, 14, 14, 18, 18, 18};

namespace {

// Segment index j in 1..16 with a <= bands[j] (first such j), or 0 when a is beyond the last band.
int segment(const int32_t* bands, int64_t a) {
  for (int j = 1; j <= 16; ++j)
    if (a <= bands[j]) return j;
  return 0;
}

// floor(v / 2^sh) for signed v (arithmetic shift).
int64_t floor_shift(int64_t v, int sh) { return v >> sh; }

int32_t q15_to_q7(int64_t q15) {
  const int64_t y = (q15 + 128) >> 8;  // floor(q15 / 256 + 1/2)
  return static_cast<int32_t>(y < -128 ? -128 : (y > 127 ? 127 : y));
}

template <class Fn>
std::array<int8_t, 65536> build(Fn fn, int lo, int hi) {
  std::array<int8_t, 65536> t{};
  for (int32_t v = -32768; v <= 32767; ++v) {
    int32_t y = fn(v);
    y = y < lo ? lo : (y > hi ? hi : y);
    t[static_cast<size_t>(v + 32768)] = static_cast<int8_t>(y);
  }
  return t;
}

}  // namespace

int32_t sigmoid_q11_formula(int64_t v) {
  const int64_t a = v < 0 ? -v : v;
  const int j = segment(kSigBands, a);
  if (j == 0) return 0;
  const int sh = kSigShifts[j - 1];
  const int64_t q15 = floor_shift(int64_t(kSigSlopes[j - 1]) * v, sh) + (v < 0 ? kSigBiasNeg[j - 1] : kSigBiasPos[j - 1]);
  return q15_to_q7(q15);
}

int32_t tanh_q11_formula(int64_t v) {
  const int64_t a = v < 0 ? (v == -32768 ? 32767 : -v) : v;
  const int j = segment(kTanhBands, a);
  if (j == 0) return 0;
  const int sh = kTanhShifts[j - 1];
  const int64_t s = kTanhSlopes[j - 1];
  const int64_t q15 = v >= 0 ? floor_shift(s * a, sh) + kTanhBias[j - 1] : floor_shift(-s * a, sh) - kTanhBias[j - 1];
  return q15_to_q7(q15);
}

// Function-local statics: built once, thread-safe initialization (C++11 magic statics).
const int8_t* sigmoid_table() {
  static const std::array<int8_t, 65536> t = build([](int32_t v) { return sigmoid_q11_formula(v); }, 0, 127);
  return t.data();
}

const int8_t* tanh_table() {
  static const std::array<int8_t, 65536> t = build([](int32_t v) { return tanh_q11_formula(v); }, -128, 127);
  return t.data();
}

}  // namespace ortquant::luna
