#include "core/linger/softmax.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "core/requant.h"

namespace ortquant::linger {
namespace {

int64_t sat32(int64_t v) { return v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : v); }

int floor_log2(uint64_t v) { return 63 - __builtin_clzll(v); }

// log2 table of the LOGN kernel: 128 (value at the segment centre - 1 in Q31, slope) pairs (linger-extra.md).
constexpr int32_t kLog2Table[256] = {
    -2135405020, 1543054448, -2111388125, 1531138969, -2087555976, 1519406104, -2063905754, 1507851685,
    -2040434703, 1496471672, -2017140127, 1485262146, -1994019392, 1474219305, -1971069924, 1463339458,
    -1948289204, 1452619022, -1925674768, 1442054520, -1903224206, 1431642574, -1880935160, 1421379903,
    -1858805323, 1411263320, -1836832436, 1401289728, -1815014290, 1391456116, -1793348719, 1381759558,
    -1771833605, 1372197208, -1750466872, 1362766299, -1729246487, 1353464140, -1708170460, 1344288112,
    -1687236840, 1335235667, -1666443715, 1326304325, -1645789212, 1317491671, -1625271494, 1308795357,
    -1604888763, 1300213092, -1584639253, 1291742648, -1564521234, 1283381855, -1544533010, 1275128595,
    -1524672916, 1266980808, -1504939321, 1258936486, -1485330622, 1250993669, -1465845250, 1243150448,
    -1446481662, 1235404963, -1427238345, 1227755396, -1408113815, 1220199979, -1389106614, 1212736982,
    -1370215312, 1205364720, -1351438503, 1198081550, -1332774808, 1190885865, -1314222872, 1183776099,
    -1295781365, 1176750721, -1277448980, 1169808239, -1259224434, 1162947194, -1241106464, 1156166160,
    -1223093832, 1149463748, -1205185319, 1142838597, -1187379730, 1136289378, -1169675887, 1129814795,
    -1152072635, 1123413578, -1134568837, 1117084487, -1117163376, 1110826311, -1099855152, 1104637864,
    -1082643085, 1098517986, -1065526114, 1092465546, -1048503192, 1086479433, -1031573292, 1080558564,
    -1014735402, 1074701878, -997988529,  1068908337, -981331693,  1063176925, -964763932,  1057506648,
    -948284297,  1051896533, -931891857,  1046345628, -915585693,  1040853000, -899364902,  1035417736,
    -883228594,  1030038943, -867175895,  1024715744, -851205942,  1019447283, -835317887,  1014232719,
    -819510893,  1009071229, -803784139,  1003962008, -788136812,  998904264,  -772568116,  993897226,
    -757077264,  988940132,  -741663481,  984032241,  -726326004,  979172822,  -711064081,  974361162,
    -695876973,  969596560,  -680763947,  964878328,  -665724287,  960205794,  -650757282,  955578296,
    -635862234,  950995187,  -621038454,  946455831,  -606285264,  941959603,  -591601995,  937505894,
    -576987987,  933094101,  -562442589,  928723637,  -547965161,  924393923,  -533555070,  920104392,
    -519211692,  915854487,  -504934414,  911643662,  -490722627,  907471380,  -476575735,  903337114,
    -462493147,  899240347,  -448474281,  895180571,  -434518564,  891157288,  -420625429,  887170007,
    -406794316,  883218247,  -393024676,  879301537,  -379315963,  875419411,  -365667642,  871571413,
    -352079181,  867757096,  -338550059,  863976020,  -325079760,  860227750,  -311667773,  856511864,
    -298313597,  852827942,  -285016736,  849175574,  -271776698,  845554356,  -258593002,  841963892,
    -245465169,  838403791,  -232392727,  834873669,  -219375212,  831373151,  -206412164,  827901864,
    -193503129,  824459445,  -180647658,  821045534,  -167845309,  817659779,  -155095645,  814301834,
    -142398234,  810971356,  -129752649,  807668010,  -117158469,  804391466,  -104615278,  801141400,
    -92122664,   797917491,  -79680221,   794719425,  -67287549,   791546892,  -54944250,   788399588,
    -42649932,   785277214,  -30404208,   782179473,  -18206696,   779106077,  -6057018,    776056738,
};

constexpr int64_t kExpC = 774541002;    // log2(e) * 2^29
constexpr int64_t kLn2C = 1488522236;   // ln(2) * 2^31
constexpr int64_t kP23[5] = {57364, 446161, 2008107, 5813551, 8388575};

// x (int8/int16 value) to Q25 as linger does it in float32: l > 0 multiplies by 2^l, l <= 0 rounds half up.
// Returns the float32 result; the caller converts (saturating, or with x86's int()).
float to_q25_float(int32_t x, int l, float p) {
  float t = static_cast<float>(x) * p;
  if (l <= 0) {
    t = t + 0.5f;
    t = std::floor(t);
  }
  return t;
}

}  // namespace

void softmax_q25_row(const int32_t* X, int64_t n, int32_t* out, int64_t* e) {
  if (n <= 0) return;
  int32_t M = X[0];
  for (int64_t i = 1; i < n; ++i) M = X[i] > M ? X[i] : M;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = int64_t(X[i]) - M;
    if (d < -(int64_t(1) << 31)) d = -(int64_t(1) << 31);
    // Exponent in base 2, Q23: the exact product converted to double, times 2^-31, + 0.5 in double, floor.
    const double p = static_cast<double>(d * kExpC);
    const int32_t t = static_cast<int32_t>(sat32(static_cast<int64_t>(std::floor(p * 0x1p-31 + 0.5))));
    const int32_t ni = t >> 23;
    const int64_t f = int64_t(t & 0x7FFFFF) - (int64_t(1) << 23);
    int64_t y = kP23[0];
    for (int c = 1; c < 5; ++c) y = ((y * f + (int64_t(1) << 22)) >> 23) + kP23[c];
    const int sh = ni + 1;  // <= 1
    e[i] = sh >= 0 ? (y << sh) : (-sh >= 63 ? 0 : (y >> -sh));
  }
  int64_t S = 0;
  for (int64_t i = 0; i < n; ++i) S = sat32(S + e[i]);
  // Reciprocal of S (S >= 8388668 always: the maximum contributes 2 * 4194334).
  const int L = floor_log2(static_cast<uint64_t>(S));
  const int64_t xn = S >> (L - 22);
  int64_t y = 12275712 - xn;
  for (int it = 0; it < 2; ++it) {
    const int64_t g = (y * xn + (int64_t(1) << 22)) >> 23;
    y = y + ((2 * ((int64_t(1) << 22) - g) * y + (int64_t(1) << 22)) >> 23);
  }
  const int64_t R = y >> (L - 23);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>((e[i] * R + (int64_t(1) << 30)) >> 31);
}

int32_t logn_q15(int32_t v) {
  if (v <= 0) return INT32_MIN;
  const int k = 30 - floor_log2(static_cast<uint64_t>(v));
  const int64_t m = (int64_t(v) << k) - (int64_t(1) << 30);
  const int64_t j = m >> 23;
  const int64_t u = 4 * (m & 0x7FFFFF) - (int64_t(1) << 24);
  const int64_t acc = int64_t(kLog2Table[2 * j]) * (int64_t(1) << 32) + 2 * int64_t(kLog2Table[2 * j + 1]) * u;
  const int64_t l2 = int64_t(16 - k) * (int64_t(1) << 25) + (acc >> 38);
  const double r = std::round(static_cast<double>(l2 * kLn2C) * 0x1p-31);
  return static_cast<int32_t>(r < -2147483648.0 ? INT32_MIN : (r > 2147483647.0 ? INT32_MAX : r));
}

template <class Ti, class To>
void softmax_int(SoftmaxKind kind, const Ti* x, To* y, int64_t outer, int64_t n, int64_t inner, float scale_x,
                 const SoftmaxOutput& out, int64_t row_begin, int64_t row_end) {
  const int qx = static_cast<int>(std::trunc(std::log2(static_cast<double>(scale_x))));
  const int l = 25 - qx;
  const float p = std::ldexp(1.0f, l);
  std::vector<int32_t> X(static_cast<size_t>(n)), P(static_cast<size_t>(n));
  std::vector<int64_t> scratch(static_cast<size_t>(n));
  const double lo = static_cast<double>(luna::int_min(out.o_bits)), hi = static_cast<double>(luna::int_max(out.o_bits));
  (void)outer;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t o = row / inner, i = row - o * inner;
    const int64_t base = o * n * inner + i;
    for (int64_t j = 0; j < n; ++j) {
      const float t = to_q25_float(x[base + j * inner], l, p);
      X[static_cast<size_t>(j)] = kind == SoftmaxKind::kSoftmax
                                      ? static_cast<int32_t>(sat32(luna::x86_float_to_int64(t)))
                                      : luna::x86_float_to_int32(t);
    }
    softmax_q25_row(X.data(), n, P.data(), scratch.data());
    for (int64_t j = 0; j < n; ++j) {
      const int32_t pj = P[static_cast<size_t>(j)];
      To& dst = y[base + j * inner];
      if (kind == SoftmaxKind::kSoftmax) {
        const int32_t pc = pj > 32767 ? 32767 : pj;  // P is never negative
        if constexpr (std::is_same_v<To, float>) {
          dst = static_cast<float>(pc) / 32768.0f;
        } else {
          float w = static_cast<float>(pc) * out.scale_o;
          w = w / 32768.0f;
          w = w + 0.5f;
          w = std::floor(w);
          dst = static_cast<To>(luna::saturate(luna::x86_float_to_int32(w), 8));
        }
      } else {
        int64_t q = logn_q15(pj);
        q = q > 0 ? 0 : q;
        const float F = static_cast<float>(static_cast<int32_t>(q)) / 33554432.0f;  // exact: / 2^25
        if constexpr (std::is_same_v<To, float>) {
          dst = F;
        } else {
          float w = F * out.scale_o;
          w = w + 0.5f;
          const double f = std::floor(static_cast<double>(w));
          dst = static_cast<To>(f < lo ? lo : (f > hi ? hi : f));
        }
      }
    }
  }
}

#define ORTQUANT_SOFTMAX(Ti, To)                                                                            \
  template void softmax_int<Ti, To>(SoftmaxKind, const Ti*, To*, int64_t, int64_t, int64_t, float,          \
                                    const SoftmaxOutput&, int64_t, int64_t);
ORTQUANT_SOFTMAX(int8_t, int8_t)
ORTQUANT_SOFTMAX(int8_t, int16_t)
ORTQUANT_SOFTMAX(int8_t, int32_t)
ORTQUANT_SOFTMAX(int8_t, float)
ORTQUANT_SOFTMAX(int16_t, int8_t)
ORTQUANT_SOFTMAX(int16_t, int16_t)
ORTQUANT_SOFTMAX(int16_t, int32_t)
ORTQUANT_SOFTMAX(int16_t, float)
#undef ORTQUANT_SOFTMAX

}  // namespace ortquant::linger
