// MultiThreshold loops of the AVX-512 path: 16 lanes, branchless binary search (see multithreshold.h).
// fixed row (channels-first runs, global thresholds): the first 8 levels of the search are register lookups in
// the prepared heap (levels 0-3 from one register, level 4 from 16, 5 from 32, 6 from 64, 7 from 128 entries),
// deeper levels gather from memory. cyclic (channels-last, a channel per lane): the first 4 levels count against rows
// of consecutive channels (plain loads), deeper levels gather.
// GCC 12 reports its own AVX-512 intrinsics (which start from _mm512_undefined_*) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/simd.h"

#include "core/qonnx/multithreshold_kernels.h"

namespace ortquant::qonnx::avx512 {
namespace {

constexpr int kRegisterLevels = 8;

inline __m512 affine(__m512i count, __m512 vs, __m512 vb) {
  // Two roundings, like numpy's out_scale * count + out_bias (no fused multiply-add).
  return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(count), vs), vb);
}

inline __mmask16 ge(__m512 x, __m512 t) { return _mm512_cmp_ps_mask(x, t, _CMP_GE_OQ); }

// Steps s = from-1 .. 0 from memory: pos += 2^s where x >= row[base + pos + 2^s - 1].
inline __m512i gather_steps(const float* row, __m512i base, __m512i pos, __m512 x, int from) {
  for (int s = from - 1; s >= 0; --s) {
    const __m512i idx = _mm512_add_epi32(_mm512_add_epi32(base, pos), _mm512_set1_epi32((1 << s) - 1));
    const __m512 t = _mm512_i32gather_ps(idx, row, 4);
    pos = _mm512_mask_add_epi32(pos, ge(x, t), pos, _mm512_set1_epi32(1 << s));
  }
  return pos;
}

// Entry i (< 2^level) of a level table held in registers r[0 .. 2^level / 16).
inline __m512 lookup(int level, __m512i i, const __m512* r) {
  if (level == 4) return _mm512_permutexvar_ps(i, r[0]);
  const __m512 a = _mm512_permutex2var_ps(r[0], i, r[1]);
  if (level == 5) return a;
  const __m512 b = _mm512_permutex2var_ps(r[2], i, r[3]);
  const __m512 lo = _mm512_mask_blend_ps(_mm512_test_epi32_mask(i, _mm512_set1_epi32(32)), a, b);
  if (level == 6) return lo;
  const __m512 c = _mm512_permutex2var_ps(r[4], i, r[5]);
  const __m512 d = _mm512_permutex2var_ps(r[6], i, r[7]);
  const __m512 hi = _mm512_mask_blend_ps(_mm512_test_epi32_mask(i, _mm512_set1_epi32(32)), c, d);
  return _mm512_mask_blend_ps(_mm512_test_epi32_mask(i, _mm512_set1_epi32(64)), lo, hi);
}

}  // namespace

void multithreshold_fixed(const ThresholdTable& table, int64_t channel, const float* x, float* y, int64_t n, float scale,
                          float bias) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 vb = _mm512_set1_ps(bias);
  const int steps = table.steps;
  const float* row = table.sorted.data() + channel * table.width;
  const float* heap = table.heap.data() + channel * table.heap_stride;
  const int reg = table.heap_levels;  // min(steps, 8) levels in registers
  const int first = reg < 4 ? reg : 4;
  // Levels 0-3 (15 nodes) share one register; level L >= 4 has 2^L nodes in 2^L / 16 registers.
  const __m512 h0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << ((1 << first) - 1)) - 1u), heap);
  __m512 levels[kRegisterLevels][8];
  for (int level = first; level < reg; ++level)
    for (int r = 0; r < (1 << level) / 16; ++r) levels[level][r] = _mm512_loadu_ps(heap + (1 << level) - 1 + 16 * r);
  const __m128i low_shift = _mm_cvtsi32_si128(steps - reg);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi32(1);

  auto search = [&](__m512 xv) {
    // pos is the node index within the current level; a hit descends right.
    __m512i pos = zero;
    for (int level = 0; level < first; ++level) {
      const __m512 t = _mm512_permutexvar_ps(_mm512_add_epi32(pos, _mm512_set1_epi32((1 << level) - 1)), h0);
      const __m512i twice = _mm512_add_epi32(pos, pos);
      pos = _mm512_mask_add_epi32(twice, ge(xv, t), twice, one);
    }
    for (int level = first; level < reg; ++level) {
      const __mmask16 m = ge(xv, lookup(level, pos, levels[level]));
      const __m512i twice = _mm512_add_epi32(pos, pos);
      pos = _mm512_mask_add_epi32(twice, m, twice, one);
    }
    if (reg < steps) pos = gather_steps(row, zero, _mm512_sll_epi32(pos, low_shift), xv, steps - reg);
    return affine(pos, vs, vb);
  };

  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, search(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, search(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void multithreshold_cyclic(const ThresholdTable& table, int64_t c0, const float* x, float* y, int64_t n, float scale,
                           float bias) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 vb = _mm512_set1_ps(bias);
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
  // Lane l holds channel (c + l) % channels; c advances by 16 channels per vector.
  int64_t c = c0;
  const int64_t advance = 16 % channels;
  alignas(64) int32_t lane[16];
  for (int l = 0; l < 16; ++l) lane[l] = static_cast<int32_t>((c0 + l) % channels);
  __m512i ch = _mm512_load_si512(lane);
  const __m512i vc = _mm512_set1_epi32(static_cast<int32_t>(channels));
  const __m512i vadvance = _mm512_set1_epi32(static_cast<int32_t>(advance));
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi32(1);

  auto search = [&](__m512 xv) {
    // Levels 0 .. top-1 by counting the (ascending, NaN-last) top nodes of each lane's channel.
    __m512i pos = zero;
    for (int k = 0; k < nodes; ++k)
      pos = _mm512_mask_add_epi32(pos, ge(xv, _mm512_loadu_ps(top_rows + k * stride + c)), pos, one);
    if (low > 0) {
      const __m512i base = _mm512_sll_epi32(ch, width_shift);
      pos = gather_steps(rows, base, _mm512_sll_epi32(pos, low_shift), xv, low);
    }
    c += advance;
    if (c >= channels) c -= channels;
    ch = _mm512_add_epi32(ch, vadvance);
    ch = _mm512_mask_sub_epi32(ch, _mm512_cmpge_epi32_mask(ch, vc), ch, vc);
    return affine(pos, vs, vb);
  };

  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, search(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, search(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace ortquant::qonnx::avx512
