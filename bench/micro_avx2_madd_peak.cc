// AVX2 multiply throughput of one core, thread CPU time. Each sequence runs as inline assembly on 6 independent
// accumulators (ymm0-5) with 6 different activation registers (ymm6-11), so that neither the compiler (common
// subexpressions, spilled accumulators) nor a dependency chain decides the figure: only how the instructions issue.
//   madd        vpmaddwd + vpaddd                              16 MAC: the widening AVX2 GEMM kernel
//   ubs+madd    vpmaddubsw + vpmaddwd(ones) + vpaddd           32 MAC: MLAS's u8s8 sequence (it saturates), and
//                                                              ortquant's exact kernel for activations in [0, 127]
//                                                              or weights with |w| <= 64
//   ubs+addw    vpmaddubsw + vpaddw                            32 MAC, int16 sums: the narrow-code kernels
//   sign        vpsignb + vpmaddubsw + vpmaddwd(ones) + vpaddd 32 MAC: ortquant's exact kernel for signed
//                                                              activations, vpmaddubsw(|x|, w * sign x)
//   xor         vpxor + vpmaddubsw + vpmaddwd(ones) + vpaddd   32 MAC: vpmaddubsw(|x|, w ^ (x < 0)), the same
//                                                              product with a per-pixel correction, no vpsignb
//   bc+...      the same with the weight broadcast from memory (vpbroadcastd) per step, as the 6x8 tiles do
//   fma         vfmadd231ps                                     8 MAC: onnxruntime's float convolution (6 chains of
//                                                              its 4-cycle latency: 1.5 per cycle, not its peak)
// Prints the core clock (a chain of dependent integer adds), then per sequence GMAC/s and steps per cycle (best of
// 9 rounds). The loops before this version let the compiler fold the 10 identical products of an iteration into one
// and spill the accumulators, so they timed vpaddd chains through memory, not the multiplies.
//   g++ -O2 -mavx2 -mfma bench/micro_avx2_madd_peak.cc -o build/micro_avx2_madd_peak && build/micro_avx2_madd_peak
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

static double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

alignas(64) static int32_t g_weights[16];

// One step on accumulator c with activation register a (ymm12: weights, ymm13: int16 ones, ymm14: temporary).
#define R(n) "%%ymm" #n
#define S_MADD(a, c) "vpmaddwd " R(12) ", " R(a) ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_UBS(a, c)                                                                                  \
  "vpmaddubsw " R(12) ", " R(a) ", " R(14) "\n\tvpmaddwd " R(13) ", " R(14) ", " R(14) "\n\tvpaddd " R(14) \
  ", " R(c) ", " R(c) "\n\t"
#define S_ADDW(a, c) "vpmaddubsw " R(12) ", " R(a) ", " R(14) "\n\tvpaddw " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_SIGN(a, c)                                                                                   \
  "vpsignb " R(a) ", " R(12) ", " R(14) "\n\tvpmaddubsw " R(14) ", " R(a) ", " R(14) "\n\tvpmaddwd " R(13) \
  ", " R(14) ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_XOR(a, c)                                                                                   \
  "vpxor " R(a) ", " R(12) ", " R(14) "\n\tvpmaddubsw " R(14) ", " R(a) ", " R(14) "\n\tvpmaddwd " R(13) \
  ", " R(14) ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_BC_UBS(a, c)                                                                                  \
  "vpbroadcastd (%0), " R(14) "\n\tvpmaddubsw " R(14) ", " R(a) ", " R(14) "\n\tvpmaddwd " R(13) ", " R(14) \
  ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_BC_SIGN(a, c)                                                                                    \
  "vpbroadcastd (%0), " R(14) "\n\tvpsignb " R(a) ", " R(14) ", " R(14) "\n\tvpmaddubsw " R(14) ", " R(a) ", " \
  R(14) "\n\tvpmaddwd " R(13) ", " R(14) ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_BC_XOR(a, c)                                                                                    \
  "vpbroadcastd (%0), " R(14) "\n\tvpxor " R(a) ", " R(14) ", " R(14) "\n\tvpmaddubsw " R(14) ", " R(a) ", " \
  R(14) "\n\tvpmaddwd " R(13) ", " R(14) ", " R(14) "\n\tvpaddd " R(14) ", " R(c) ", " R(c) "\n\t"
#define S_FMA(a, c) "vfmadd231ps " R(12) ", " R(a) ", " R(c) "\n\t"
#define SIX(S) S(6, 0) S(7, 1) S(8, 2) S(9, 3) S(10, 4) S(11, 5)

// 12 steps per iteration (6 accumulators, unrolled twice); returns seconds for n iterations.
#define LOOP(name, S)                                                                                              \
  static double name(long n) {                                                                                     \
    const int32_t* p = g_weights;                                                                                  \
    const double t0 = thread_seconds();                                                                            \
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\tvpxor %%ymm2, %%ymm2, %%ymm2\n\t" \
                     "vpxor %%ymm3, %%ymm3, %%ymm3\n\tvpxor %%ymm4, %%ymm4, %%ymm4\n\tvpxor %%ymm5, %%ymm5, %%ymm5\n\t" \
                     "1:\n\t" SIX(S) SIX(S) "dec %1\n\tjnz 1b\n\t"                                                  \
                     : "+r"(p), "+r"(n)                                                                            \
                     :                                                                                             \
                     : "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm14");                         \
    return thread_seconds() - t0;                                                                                  \
  }
LOOP(run_madd, S_MADD)
LOOP(run_ubs, S_UBS)
LOOP(run_addw, S_ADDW)
LOOP(run_sign, S_SIGN)
LOOP(run_xor, S_XOR)
LOOP(run_bc_ubs, S_BC_UBS)
LOOP(run_bc_sign, S_BC_SIGN)
LOOP(run_bc_xor, S_BC_XOR)
LOOP(run_fma, S_FMA)

static double clock_ghz() {
  const long n = 100000000;
  long x = 0;
  const double t0 = thread_seconds();
  for (long i = 0; i < n; ++i) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  return 4.0 * n / (thread_seconds() - t0) / 1e9;
}

int main() {
  for (int i = 0; i < 16; ++i) g_weights[i] = 0x01fe03fd * (i + 1);
  // Activations (ymm6-11), weights (ymm12), int16 ones (ymm13): fixed values, never written by the loops.
  __asm__ volatile(
      "vpcmpeqb %%ymm13, %%ymm13, %%ymm13\n\tvpabsw %%ymm13, %%ymm13\n\tvpabsb %%ymm13, %%ymm6\n\t"
      "vpaddb %%ymm6, %%ymm6, %%ymm7\n\tvpaddb %%ymm6, %%ymm7, %%ymm8\n\tvpaddb %%ymm6, %%ymm8, %%ymm9\n\t"
      "vpaddb %%ymm6, %%ymm9, %%ymm10\n\tvpaddb %%ymm6, %%ymm10, %%ymm11\n\tvpbroadcastd (%0), %%ymm12" ::"r"(g_weights)
      : "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13");
  struct Seq {
    const char* name;
    double (*run)(long);
    int mac;  // per step
    double best = 0;
  } seqs[] = {{"madd", run_madd, 16},       {"ubs+madd", run_ubs, 32},       {"ubs+addw", run_addw, 32},
              {"sign", run_sign, 32},       {"xor", run_xor, 32},            {"bc+ubs+madd", run_bc_ubs, 32},
              {"bc+sign", run_bc_sign, 32}, {"bc+xor", run_bc_xor, 32},      {"fma", run_fma, 8}};
  const long n = 4000000;
  double ghz = 0;
  for (int round = 0; round < 9; ++round) {
    ghz = std::max(ghz, clock_ghz());
    for (Seq& s : seqs) s.best = std::max(s.best, 12.0 * n / s.run(n));  // steps per second
  }
  std::printf("clock %.2f GHz\n", ghz);
  for (const Seq& s : seqs)
    std::printf("%-12s %6.1f GMAC/s  %.2f steps/cycle\n", s.name, s.best * s.mac / 1e9, s.best / (ghz * 1e9));
  return 0;
}
