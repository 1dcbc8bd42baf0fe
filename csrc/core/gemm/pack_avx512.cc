// AVX-512 packing of gemm_cols pixel panels (flags chosen by this file's name in CMakeLists.txt): 64 pixels of
// four k-rows per step; masked loads for partial panels (no read past the row's end).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 intrinsic headers (see kernel_avx512vnni.cc)
#include "core/simd.h"

#include "core/gemm/pack.h"

namespace ortquant::gemm::avx512 {

void pack_panel(const int8_t* const* rows, int64_t k, int64_t p0, int64_t n, uint8_t* dst) {
  static_assert(kPanel == 64, "one zmm of pixels per k-row");
  const __mmask64 m = n >= 64 ? ~__mmask64{0} : ((__mmask64{1} << n) - 1);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t kg = kgroups_of(k);
  for (int64_t g = 0; g < kg; ++g) {
    __m512i v[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t kk = 4 * g + i;
      const int8_t* r = kk < k ? rows[kk] : nullptr;
      v[i] = _mm512_xor_si512(r ? _mm512_maskz_loadu_epi8(m, r + p0) : _mm512_setzero_si512(), flip);
    }
    // Per 128-bit lane L (pixels 16L .. 16L+15): r_j holds pixels 16L + 4j .. 16L + 4j + 3, 4 bytes each.
    const __m512i ab_lo = _mm512_unpacklo_epi8(v[0], v[1]), ab_hi = _mm512_unpackhi_epi8(v[0], v[1]);
    const __m512i cd_lo = _mm512_unpacklo_epi8(v[2], v[3]), cd_hi = _mm512_unpackhi_epi8(v[2], v[3]);
    const __m512i r0 = _mm512_unpacklo_epi16(ab_lo, cd_lo), r1 = _mm512_unpackhi_epi16(ab_lo, cd_lo);
    const __m512i r2 = _mm512_unpacklo_epi16(ab_hi, cd_hi), r3 = _mm512_unpackhi_epi16(ab_hi, cd_hi);
    // 4x4 transpose of 128-bit lanes: output vector L = [r0.L, r1.L, r2.L, r3.L].
    const __m512i t0 = _mm512_shuffle_i32x4(r0, r1, 0x44), t1 = _mm512_shuffle_i32x4(r0, r1, 0xEE);
    const __m512i t2 = _mm512_shuffle_i32x4(r2, r3, 0x44), t3 = _mm512_shuffle_i32x4(r2, r3, 0xEE);
    __m512i* out = reinterpret_cast<__m512i*>(dst + g * kPanel * 4);
    _mm512_store_si512(out + 0, _mm512_shuffle_i32x4(t0, t2, 0x88));
    _mm512_store_si512(out + 1, _mm512_shuffle_i32x4(t0, t2, 0xDD));
    _mm512_store_si512(out + 2, _mm512_shuffle_i32x4(t1, t3, 0x88));
    _mm512_store_si512(out + 3, _mm512_shuffle_i32x4(t1, t3, 0xDD));
  }
}

}  // namespace ortquant::gemm::avx512
