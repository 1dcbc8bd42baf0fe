// MultiThreshold loops of the AVX2 path: 8 lanes, branchless binary search (see multithreshold.h).
// fixed row: the first 6 levels are register lookups in the prepared heap (levels 0-2 from one register,
// level 3 from 8, 4 from 16, 5 from 32 entries), deeper levels gather. cyclic (a channel per lane): the first 4 levels count
// against rows of consecutive channels (plain loads), deeper levels gather.
#include "core/simd.h"

#include "core/qonnx/multithreshold_kernels.h"

namespace ortquant::qonnx::avx2 {
namespace {

constexpr int kRegisterLevels = 6;

inline __m256 affine(__m256i count, __m256 vs, __m256 vb) {
  return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(count), vs), vb);
}

// All-ones in the lanes where x >= t (ordered comparison: NaN never counts).
inline __m256i ge(__m256 x, __m256 t) { return _mm256_castps_si256(_mm256_cmp_ps(x, t, _CMP_GE_OQ)); }

inline __m256i gather_steps(const float* row, __m256i base, __m256i pos, __m256 x, int from) {
  for (int s = from - 1; s >= 0; --s) {
    const __m256i idx = _mm256_add_epi32(_mm256_add_epi32(base, pos), _mm256_set1_epi32((1 << s) - 1));
    const __m256i m = ge(x, _mm256_i32gather_ps(row, idx, 4));
    pos = _mm256_add_epi32(pos, _mm256_and_si256(m, _mm256_set1_epi32(1 << s)));
  }
  return pos;
}

// Picks b where bit `bit` of i is set, else a.
inline __m256 select_bit(__m256 a, __m256 b, __m256i i, int bit) {
  return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_sll_epi32(i, _mm_cvtsi32_si128(31 - bit))));
}

// Entry i (< 2^level) of a level table held in registers r[0 .. 2^level / 8).
inline __m256 lookup(int level, __m256i i, const __m256* r) {
  const __m256 a = _mm256_permutevar8x32_ps(r[0], i);
  if (level == 3) return a;
  const __m256 lo = select_bit(a, _mm256_permutevar8x32_ps(r[1], i), i, 3);
  if (level == 4) return lo;
  const __m256 hi = select_bit(_mm256_permutevar8x32_ps(r[2], i), _mm256_permutevar8x32_ps(r[3], i), i, 3);
  return select_bit(lo, hi, i, 4);
}

}  // namespace

void multithreshold_fixed(const ThresholdTable& table, int64_t channel, const float* x, float* y, int64_t n, float scale,
                          float bias) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 vb = _mm256_set1_ps(bias);
  const int steps = table.steps;
  const float* row = table.sorted.data() + channel * table.width;
  const float* heap = table.heap.data() + channel * table.heap_stride;
  const int reg = table.heap_levels < kRegisterLevels ? table.heap_levels : kRegisterLevels;
  const int first = reg < 3 ? reg : 3;
  // Levels 0-2 (7 nodes) share one register; level L >= 3 has 2^L nodes in 2^L / 8 registers.
  alignas(32) float buf[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int k = 0; k < (1 << first) - 1; ++k) buf[k] = heap[k];
  const __m256 h0 = _mm256_load_ps(buf);
  __m256 levels[kRegisterLevels][4];
  for (int level = first; level < reg; ++level)
    for (int r = 0; r < (1 << level) / 8; ++r) levels[level][r] = _mm256_loadu_ps(heap + (1 << level) - 1 + 8 * r);
  const __m128i low_shift = _mm_cvtsi32_si128(steps - reg);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi32(1);

  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    __m256i pos = zero;
    for (int level = 0; level < first; ++level) {
      const __m256 t = _mm256_permutevar8x32_ps(h0, _mm256_add_epi32(pos, _mm256_set1_epi32((1 << level) - 1)));
      pos = _mm256_add_epi32(_mm256_add_epi32(pos, pos), _mm256_and_si256(ge(xv, t), one));
    }
    for (int level = first; level < reg; ++level) {
      const __m256i m = ge(xv, lookup(level, pos, levels[level]));
      pos = _mm256_add_epi32(_mm256_add_epi32(pos, pos), _mm256_and_si256(m, one));
    }
    if (reg < steps) pos = gather_steps(row, zero, _mm256_sll_epi32(pos, low_shift), xv, steps - reg);
    _mm256_storeu_ps(y + i, affine(pos, vs, vb));
  }
  for (; i < n; ++i) {
    const float c = static_cast<float>(threshold_search(row, steps, x[i]));
    const float scaled = c * scale;
    y[i] = scaled + bias;
  }
}

void multithreshold_cyclic(const ThresholdTable& table, int64_t c0, const float* x, float* y, int64_t n, float scale,
                           float bias) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 vb = _mm256_set1_ps(bias);
  const int64_t channels = table.channels;
  const int steps = table.steps;
  const int top = table.top_steps;
  const int low = steps - top;
  const int nodes = (1 << top) - 1;
  const float* top_rows = table.top.data();
  const int64_t stride = table.top_stride;
  const float* rows = table.sorted.data();
  const __m128i width_shift = _mm_cvtsi32_si128(steps);
  const __m128i low_shift = _mm_cvtsi32_si128(low);
  int64_t c = c0;
  const int64_t advance = 8 % channels;
  alignas(32) int32_t lane[8];
  for (int l = 0; l < 8; ++l) lane[l] = static_cast<int32_t>((c0 + l) % channels);
  __m256i ch = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane));
  const __m256i vc = _mm256_set1_epi32(static_cast<int32_t>(channels));
  const __m256i vc_minus_1 = _mm256_set1_epi32(static_cast<int32_t>(channels - 1));
  const __m256i vadvance = _mm256_set1_epi32(static_cast<int32_t>(advance));
  const __m256i one = _mm256_set1_epi32(1);

  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    __m256i pos = _mm256_setzero_si256();
    for (int k = 0; k < nodes; ++k)
      pos = _mm256_add_epi32(pos, _mm256_and_si256(ge(xv, _mm256_loadu_ps(top_rows + k * stride + c)), one));
    if (low > 0) {
      const __m256i base = _mm256_sll_epi32(ch, width_shift);
      pos = gather_steps(rows, base, _mm256_sll_epi32(pos, low_shift), xv, low);
    }
    _mm256_storeu_ps(y + i, affine(pos, vs, vb));
    c += advance;
    if (c >= channels) c -= channels;
    ch = _mm256_add_epi32(ch, vadvance);
    ch = _mm256_sub_epi32(ch, _mm256_and_si256(_mm256_cmpgt_epi32(ch, vc_minus_1), vc));
  }
  for (; i < n; ++i) {
    const float cnt = static_cast<float>(threshold_search(rows + c * table.width, steps, x[i]));
    const float scaled = cnt * scale;
    y[i] = scaled + bias;
    if (++c == channels) c = 0;
  }
}

}  // namespace ortquant::qonnx::avx2
