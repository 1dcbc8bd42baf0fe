// AVX2 multiply throughput of one core (issue 11), thread CPU time, 10 independent accumulators:
//   madd     vpmaddwd + vpaddd                          (16 MAC per vpmaddwd: the widening AVX2 GEMM kernel)
//   ubs+madd vpmaddubsw + vpmaddwd(ones) + vpaddd       (32 MAC: MLAS's u8s8 sequence, and ortquant's exact
//            sign kernel, which adds one vpsignb per step)
//   ubs+addw vpmaddubsw + vpaddw                         (32 MAC, int16 accumulation: the narrow-code kernel of
//            integer mode, exact while the codes are small enough that no int16 sum can overflow)
//   sign     vpsignb + vpmaddubsw + vpmaddwd(ones) + vpaddd (32 MAC: ortquant's exact kernel for signed
//            activations, vpmaddubsw(|x|, w * sign x); |x| is computed once per panel vector, not counted)
//   fma      vfmadd231ps                                (8 MAC: onnxruntime's float convolution, for comparison)
// Prints GMAC/s of each. Whether vpmaddubsw and vpmaddwd issue on different pipes decides how far the AVX2 engine
// can go (BENCHMARKS.md, "Issue 11 on an AVX2-only CPU"):
//   g++ -O2 -mavx2 -mfma bench/micro_avx2_madd_peak.cc -o build/micro_avx2_madd_peak && build/micro_avx2_madd_peak
#include <immintrin.h>
#include <time.h>

#include <cstdio>

static double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <int kVariant>  // 0 madd, 1 ubs+madd, 2 ubs+addw, 3 sign
static double run(long n) {
  constexpr bool kUbs = kVariant != 0;
  __m256i acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(5), one = _mm256_set1_epi16(1);
  const double t0 = thread_seconds();
  for (long i = 0; i < n; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) {
      if constexpr (kVariant == 3) {
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(b, a)), one));
      } else if constexpr (kVariant == 2) {
        acc[j] = _mm256_add_epi16(acc[j], _mm256_maddubs_epi16(a, b));
      } else if constexpr (kUbs) {
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
      } else {
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(a, b));
      }
    }
    __asm__ volatile("" : "+x"(a), "+x"(b), "+x"(one));
  }
  const double s = thread_seconds() - t0;
  __m256i r = acc[0];
  for (int i = 1; i < 10; ++i) r = _mm256_add_epi32(r, acc[i]);
  volatile int sink = _mm256_extract_epi32(r, 0);
  (void)sink;
  return n * 10.0 * (kUbs ? 32 : 16) / s / 1e9;
}

static double run_fma(long n) {
  __m256 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0.0f);
  const double t0 = thread_seconds();
  for (long i = 0; i < n; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) acc[j] = _mm256_fmadd_ps(a, b, acc[j]);
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  const double s = thread_seconds() - t0;
  __m256 r = acc[0];
  for (int i = 1; i < 10; ++i) r = _mm256_add_ps(r, acc[i]);
  volatile float sink = _mm256_cvtss_f32(r);
  (void)sink;
  return n * 10.0 * 8 / s / 1e9;
}

int main() {
  const long n = 50000000;
  std::printf("madd %.1f GMAC/s, ubs+madd %.1f GMAC/s, ubs+addw %.1f GMAC/s, sign %.1f GMAC/s, fma %.1f GMAC/s\n",
              run<0>(n), run<1>(n), run<2>(n), run<3>(n), run_fma(n));
  return 0;
}
