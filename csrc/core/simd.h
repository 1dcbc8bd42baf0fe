// The x86 intrinsics of the ISA-specific kernel files (*_avx2.cc, *_avx512.cc, *_avx512vnni.cc, *_avxvnni.cc).
// Normally this is <immintrin.h> and nothing else: the compiler's own intrinsics, with the file's -m flags.
//
// In the test build that emulates the ISAs this CPU lacks (CMake option ORTQUANT_EMULATE_ISAS, `make test-isas`),
// CMake compiles the AVX-512 / AVX-512 VNNI / AVX-VNNI files with AVX2 flags only, defines ORTQUANT_SIMDE and
// force-includes this header first. Then every intrinsic the CPU lacks comes from SIMDe (portable code, exact
// integer and IEEE float results) under its usual name, and the __AVX512*__ / __AVXVNNI__ macros the kernels test
// are defined, so the same source lines are compiled and run as on a CPU with the instructions.
#pragma once

#if defined(ORTQUANT_SIMDE)
#if !defined(SIMDE_ENABLE_NATIVE_ALIASES)
#define SIMDE_ENABLE_NATIVE_ALIASES
#endif
#include <simde/x86/avx512.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
// SIMDe 0.8 has AVX-VNNI's 256-bit vpdpbusd only under its AVX-512 VL name (same operation, VEX encoding).
#define _mm256_dpbusd_avx_epi32(src, a, b) simde_mm256_dpbusd_epi32(src, a, b)

// The intrinsics the kernels use that SIMDe 0.8 lacks, lane by lane as Intel's guide defines them (or from two
// AVX2 / F16C halves where the operation is the same per lane). Masked loads read only the selected bytes.
namespace ortquant_simde {
template <class To, class From>
inline To bits(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To t;
  std::memcpy(&t, &v, sizeof(To));
  return t;
}
struct I32x16 { int32_t v[16]; };
struct I16x16 { int16_t v[16]; };
struct I8x16 { int8_t v[16]; };
struct Pd2 { __m256d v[2]; };
struct Ps2 { __m256 v[2]; };
struct Si2 { __m128i v[2]; };
struct Ps4 { __m128 v[2]; };

// Masked loads and stores touch only the selected elements (SIMDe 0.8 reads, and writes zeros to, all of them).
template <class T, class V>
inline V maskz_loadu(uint64_t k, const void* p) {
  T out[sizeof(V) / sizeof(T)] = {};
  for (size_t i = 0; i < sizeof(V) / sizeof(T); ++i)
    if ((k >> i) & 1) std::memcpy(&out[i], static_cast<const char*>(p) + sizeof(T) * i, sizeof(T));
  return bits<V>(out);
}
template <class T, class V>
inline void mask_storeu(void* p, uint64_t k, V a) {
  T in[sizeof(V) / sizeof(T)];
  std::memcpy(in, &a, sizeof(V));
  for (size_t i = 0; i < sizeof(V) / sizeof(T); ++i)
    if ((k >> i) & 1) std::memcpy(static_cast<char*>(p) + sizeof(T) * i, &in[i], sizeof(T));
}
inline __m128i cvtepi16_epi8(__m256i a) {
  const I16x16 in = bits<I16x16>(a);
  I8x16 out;
  for (int i = 0; i < 16; ++i) out.v[i] = static_cast<int8_t>(static_cast<uint16_t>(in.v[i]) & 0xFF);
  return bits<__m128i>(out);
}
inline simde__m512i cvtepi8_epi32(__m128i a) {
  const I8x16 in = bits<I8x16>(a);
  I32x16 out;
  for (int i = 0; i < 16; ++i) out.v[i] = in.v[i];
  return bits<simde__m512i>(out);
}
inline simde__m512d cvtepi32_pd(__m256i a) {
  const Si2 h = bits<Si2>(a);
  return bits<simde__m512d>(Pd2{{_mm256_cvtepi32_pd(h.v[0]), _mm256_cvtepi32_pd(h.v[1])}});
}
inline __m256i cvtpd_epi32(simde__m512d a) {
  const Pd2 h = bits<Pd2>(a);
  return bits<__m256i>(Si2{{_mm256_cvtpd_epi32(h.v[0]), _mm256_cvtpd_epi32(h.v[1])}});
}
inline __m256 cvtpd_ps(simde__m512d a) {
  const Pd2 h = bits<Pd2>(a);
  return bits<__m256>(Ps4{{_mm256_cvtpd_ps(h.v[0]), _mm256_cvtpd_ps(h.v[1])}});
}
template <int R>
inline simde__m512i maskz_cvt_roundps_epi32(uint16_t k, simde__m512 a) {
  const Ps2 h = bits<Ps2>(a);
  I32x16 out, all;
  const __m256i lo = _mm256_cvtps_epi32(_mm256_round_ps(h.v[0], R)), hi = _mm256_cvtps_epi32(_mm256_round_ps(h.v[1], R));
  std::memcpy(&all.v[0], &lo, 32);
  std::memcpy(&all.v[8], &hi, 32);
  for (int i = 0; i < 16; ++i) out.v[i] = (k >> i) & 1 ? all.v[i] : 0;
  return bits<simde__m512i>(out);
}
inline simde__m512 maskz_cvtph_ps(uint16_t k, __m256i a) {
  const Si2 h = bits<Si2>(a);
  const Ps2 f{{_mm256_cvtph_ps(h.v[0]), _mm256_cvtph_ps(h.v[1])}};
  float v[16];
  std::memcpy(v, &f, 64);
  for (int i = 0; i < 16; ++i)
    if (!((k >> i) & 1)) v[i] = 0.0f;
  return bits<simde__m512>(v);
}
template <int R>
inline __m256i maskz_cvtps_ph(uint16_t k, simde__m512 a) {
  const Ps2 h = bits<Ps2>(a);
  uint16_t v[16];
  const __m128i lo = _mm256_cvtps_ph(h.v[0], R), hi = _mm256_cvtps_ph(h.v[1], R);
  std::memcpy(&v[0], &lo, 16);
  std::memcpy(&v[8], &hi, 16);
  for (int i = 0; i < 16; ++i)
    if (!((k >> i) & 1)) v[i] = 0;
  return bits<__m256i>(v);
}
// SIMDe 0.8 ignores the rounding-mode bits here; vroundpd's immediate has the same low four bits.
template <int R>
inline simde__m512d roundscale_pd(simde__m512d a) {
  static_assert((R >> 4) == 0, "only roundscale to integers (no scale bits) is emulated");
  const Pd2 h = bits<Pd2>(a);
  return bits<simde__m512d>(Pd2{{_mm256_round_pd(h.v[0], R), _mm256_round_pd(h.v[1], R)}});
}
// The same for float32 (SIMDe 0.8 reads the exception-suppression bit 3 as a scale bit: floor to halves).
template <int R>
inline simde__m512 roundscale_ps(simde__m512 a) {
  static_assert((R >> 4) == 0, "only roundscale to integers (no scale bits) is emulated");
  const Ps2 h = bits<Ps2>(a);
  return bits<simde__m512>(Ps2{{_mm256_round_ps(h.v[0], R), _mm256_round_ps(h.v[1], R)}});
}
inline simde__m512i i32gather_epi32(simde__m512i idx, const void* base, int scale) {
  const I32x16 in = bits<I32x16>(idx);
  I32x16 out;
  for (int i = 0; i < 16; ++i)
    std::memcpy(&out.v[i], static_cast<const char*>(base) + static_cast<int64_t>(in.v[i]) * scale, 4);
  return bits<simde__m512i>(out);
}
template <class T>
inline void mask_cvtepi32_storeu(void* p, uint16_t k, simde__m512i a) {
  const I32x16 in = bits<I32x16>(a);
  for (int i = 0; i < 16; ++i) {
    if (!((k >> i) & 1)) continue;
    const T t = static_cast<T>(in.v[i]);  // truncation: the low bits
    std::memcpy(static_cast<char*>(p) + sizeof(T) * i, &t, sizeof(T));
  }
}
inline simde__m512i srav_epi32(simde__m512i a, simde__m512i count) {
  const I32x16 x = bits<I32x16>(a), c = bits<I32x16>(count);
  I32x16 out;
  for (int i = 0; i < 16; ++i) {
    const uint32_t n = static_cast<uint32_t>(c.v[i]);
    out.v[i] = n > 31 ? (x.v[i] < 0 ? -1 : 0) : (x.v[i] >> n);
  }
  return bits<simde__m512i>(out);
}
}  // namespace ortquant_simde

#undef _mm_maskz_loadu_epi8
#undef _mm256_maskz_loadu_epi8
#undef _mm512_maskz_loadu_epi8
#undef _mm512_maskz_loadu_epi32
#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_epi32
#undef _mm512_mask_storeu_ps
#undef _mm256_cvtepi16_epi8
#undef _mm512_cvtepi8_epi32
#undef _mm512_cvtepi32_pd
#undef _mm512_cvtpd_epi32
#undef _mm512_cvtpd_ps
#undef _mm512_maskz_cvt_roundps_epi32
#undef _mm512_maskz_cvtph_ps
#undef _mm512_maskz_cvtps_ph
#undef _mm512_i32gather_epi32
#undef _mm512_roundscale_pd
#undef _mm512_roundscale_ps
#undef _mm512_mask_cvtepi32_storeu_epi8
#undef _mm512_mask_cvtepi32_storeu_epi16
#undef _mm512_srav_epi32
#undef _mm512_undefined_epi32
#define _mm_maskz_loadu_epi8(k, p) ortquant_simde::maskz_loadu<int8_t, __m128i>(k, p)
#define _mm256_maskz_loadu_epi8(k, p) ortquant_simde::maskz_loadu<int8_t, __m256i>(k, p)
#define _mm512_maskz_loadu_epi8(k, p) ortquant_simde::maskz_loadu<int8_t, simde__m512i>(k, p)
#define _mm512_maskz_loadu_epi32(k, p) ortquant_simde::maskz_loadu<int32_t, simde__m512i>(k, p)
#define _mm512_maskz_loadu_ps(k, p) ortquant_simde::maskz_loadu<float, simde__m512>(k, p)
#define _mm512_mask_storeu_epi32(p, k, a) ortquant_simde::mask_storeu<int32_t, simde__m512i>(p, k, a)
#define _mm512_mask_storeu_ps(p, k, a) ortquant_simde::mask_storeu<float, simde__m512>(p, k, a)
#define _mm256_cvtepi16_epi8(a) ortquant_simde::cvtepi16_epi8(a)
#define _mm512_cvtepi8_epi32(a) ortquant_simde::cvtepi8_epi32(a)
#define _mm512_cvtepi32_pd(a) ortquant_simde::cvtepi32_pd(a)
#define _mm512_cvtpd_epi32(a) ortquant_simde::cvtpd_epi32(a)
#define _mm512_cvtpd_ps(a) ortquant_simde::cvtpd_ps(a)
#define _mm512_maskz_cvt_roundps_epi32(k, a, r) ortquant_simde::maskz_cvt_roundps_epi32<(r)>(k, a)
#define _mm512_maskz_cvtph_ps(k, a) ortquant_simde::maskz_cvtph_ps(k, a)
#define _mm512_maskz_cvtps_ph(k, a, r) ortquant_simde::maskz_cvtps_ph<(r)>(k, a)
#define _mm512_roundscale_pd(a, r) ortquant_simde::roundscale_pd<(r)>(a)
#define _mm512_roundscale_ps(a, r) ortquant_simde::roundscale_ps<(r)>(a)
#define _mm512_i32gather_epi32(idx, base, scale) ortquant_simde::i32gather_epi32(idx, base, scale)
#define _mm512_mask_cvtepi32_storeu_epi8(p, k, a) ortquant_simde::mask_cvtepi32_storeu<int8_t>(p, k, a)
#define _mm512_mask_cvtepi32_storeu_epi16(p, k, a) ortquant_simde::mask_cvtepi32_storeu<int16_t>(p, k, a)
#define _mm512_srav_epi32(a, c) ortquant_simde::srav_epi32(a, c)
#define _mm512_undefined_epi32() simde_mm512_setzero_si512()
// A non-temporal store writes the same values as a plain one (only the cache hint differs).
#define _mm512_stream_ps(p, a) simde_mm512_storeu_ps(p, a)
// What the kernels test to choose their AVX-512 / VNNI code (SIMDe is included first: it must see the real flags).
#if !defined(__AVX512F__)
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512DQ__ 1
#define __AVX512VL__ 1
#define __AVX512VNNI__ 1
#define __AVXVNNI__ 1
#endif
#else
#include <immintrin.h>
#endif
