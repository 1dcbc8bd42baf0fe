// AVX2 multiply throughput of one core (issue 11), thread CPU time, 10 independent accumulators:
//   madd     vpmaddwd + vpaddd                          (16 MAC per vpmaddwd: the widening AVX2 GEMM kernel)
//   ubs+madd vpmaddubsw + vpmaddwd(ones) + vpaddd       (32 MAC: MLAS's u8s8 sequence, and ortquant's exact
//            sign kernel, which adds one vpsignb per step)
// Prints GMAC/s of each. Whether vpmaddubsw and vpmaddwd issue on different pipes decides how far the AVX2 engine
// can go (BENCHMARKS.md, "Issue 11 on an AVX2-only CPU"):
//   g++ -O2 -mavx2 bench/micro_avx2_madd_peak.cc -o build/micro_avx2_madd_peak && build/micro_avx2_madd_peak
#include <immintrin.h>
#include <time.h>

#include <cstdio>

static double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <bool kUbs>
static double run(long n) {
  __m256i acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(5), one = _mm256_set1_epi16(1);
  const double t0 = thread_seconds();
  for (long i = 0; i < n; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < 10; ++j) {
      if constexpr (kUbs) {
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

int main() {
  const long n = 50000000;
  std::printf("madd %.1f GMAC/s, ubs+madd %.1f GMAC/s\n", run<false>(n), run<true>(n));
  return 0;
}
