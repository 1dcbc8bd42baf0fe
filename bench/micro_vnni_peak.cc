// The measured int8 peak of one core: back-to-back vpdpbusd zmm on 12 independent accumulators (4-cycle latency,
// 2 per cycle need >= 8), timed on the thread's CPU clock so time-slicing on a shared VM does not count.
// Prints GOPS (2 ops per multiply-accumulate). Built and run by bench/bench_gemm.py:
//   g++ -O2 -mavx512f -mavx512vnni bench/micro_vnni_peak.cc -o build/micro_vnni_peak && build/micro_vnni_peak
#include <immintrin.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

static double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 20000000;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
            c9 = c0, c10 = c0, c11 = c0;
    const double t0 = thread_seconds();
    for (long i = 0; i < iters; ++i) {
      asm volatile(
          "vpdpbusd %[b], %[a], %[c0]\n\tvpdpbusd %[b], %[a], %[c1]\n\tvpdpbusd %[b], %[a], %[c2]\n\t"
          "vpdpbusd %[b], %[a], %[c3]\n\tvpdpbusd %[b], %[a], %[c4]\n\tvpdpbusd %[b], %[a], %[c5]\n\t"
          "vpdpbusd %[b], %[a], %[c6]\n\tvpdpbusd %[b], %[a], %[c7]\n\tvpdpbusd %[b], %[a], %[c8]\n\t"
          "vpdpbusd %[b], %[a], %[c9]\n\tvpdpbusd %[b], %[a], %[c10]\n\tvpdpbusd %[b], %[a], %[c11]"
          : [c0] "+v"(c0), [c1] "+v"(c1), [c2] "+v"(c2), [c3] "+v"(c3), [c4] "+v"(c4), [c5] "+v"(c5),
            [c6] "+v"(c6), [c7] "+v"(c7), [c8] "+v"(c8), [c9] "+v"(c9), [c10] "+v"(c10), [c11] "+v"(c11)
          : [a] "v"(a), [b] "v"(b));
    }
    const double t = thread_seconds() - t0;
    volatile int sink = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c11));
    (void)sink;
    const double gops = 2.0 * 64.0 * 12.0 * static_cast<double>(iters) / t / 1e9;
    if (gops > best) best = gops;
  }
  std::printf("%.1f\n", best);
  return 0;
}
