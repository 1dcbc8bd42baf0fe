// The inner loop of the AVX2 kernel for activations in [0, 127] against 8-bit weights (tile_nonneg<kOne> and
// tile_runs<kOne>, nonneg_flush == 1: every pair sum widened at once, vpmaddubsw + vpmaddwd(ones) + vpaddd),
// kernel loop only (no epilogue, one 64-pixel panel and one 6-row weight block in L1), thread CPU time, best of 9
// rounds. Two copies of the loop:
//   6x8   8 pixels x 6 rows in intrinsics, one weight broadcast per vpmaddubsw (the tile before the 16-pixel one)
//   6x16  16 pixels x 6 rows, each row's step one asm statement (nonneg_step_avx2.inc, one_step2): 12 int32
//         accumulators, one broadcast per two vpmaddubsw, `ones` a memory operand of vpmaddwd
// Both must agree bit for bit (checked before timing). Usage: micro_avx2_one_tile [kgroups]
//   g++ -O3 -mavx2 -mfma -mbmi2 bench/micro_avx2_one_tile.cc -o build/micro_avx2_one_tile
#include <immintrin.h>
#include <time.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static double ts() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static inline int32_t load_i32(const void* p) { int32_t v; memcpy(&v, p, 4); return v; }
constexpr int kMR = 6, kPanel = 64;
alignas(32) static const int16_t kOnes16[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
alignas(32) static const uint8_t kFlip80[32] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
__attribute__((noinline)) void old_tile(const uint8_t* A, const uint8_t* B, int64_t kg, int nr, int32_t* out) {
  const __m256i z = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
  for (int c0 = 0; c0 < nr; c0 += 8) {
#define D(r) __m256i acc##r = z;
    ROWS(D)
    const uint8_t* a = A;
    const uint8_t* b = B + c0 * 4;
    for (int64_t g = 0; g < kg; ++g) {
      __m256i xv = _mm256_xor_si256(_mm256_load_si256((const __m256i*)b), flip);
#define RW(r) { __m256i wb = _mm256_set1_epi32(load_i32(a + 4 * r)); acc##r = _mm256_add_epi32(acc##r, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wb), ones)); }
      ROWS(RW) a += kMR * 4;
      b += kPanel * 4;
    }
#define O(r) _mm256_storeu_si256((__m256i*)(out + (r)*64 + c0), acc##r);
    ROWS(O)
  }
}
static inline __attribute__((always_inline)) void one_step2(__m256i& l, __m256i& h, __m256i x0, __m256i x1, const uint8_t* w) {
  __m256i wb, p;
  asm("vpbroadcastd %[w], %[wb]\n\t"
      "vpmaddubsw %[wb], %[x0], %[p]\n\t"
      "vpmaddwd %[ones], %[p], %[p]\n\t"
      "vpaddd %[p], %[l], %[l]\n\t"
      "vpmaddubsw %[wb], %[x1], %[wb]\n\t"
      "vpmaddwd %[ones], %[wb], %[wb]\n\t"
      "vpaddd %[wb], %[h], %[h]"
      : [l] "+x"(l), [h] "+x"(h), [wb] "=&x"(wb), [p] "=&x"(p)
      : [x0] "x"(x0), [x1] "x"(x1), [w] "m"(*reinterpret_cast<const int32_t(*)[1]>(w)),
        [ones] "m"(*reinterpret_cast<const int16_t(*)[16]>(kOnes16)));
}
static inline __attribute__((always_inline)) __m256i load_flip80(const uint8_t* p) {
  __m256i x;
  asm("vmovdqu %[p], %[x]\n\tvpxor %[f], %[x], %[x]" : [x] "=x"(x)
      : [p] "m"(*reinterpret_cast<const uint8_t(*)[32]>(p)), [f] "m"(kFlip80));
  return x;
}
__attribute__((noinline)) void asm_tile(const uint8_t* A, const uint8_t* B, int64_t kg, int nr, int32_t* out) {
  const __m256i z = _mm256_setzero_si256();
  for (int c0 = 0; c0 < nr; c0 += 16) {
#define D2(r) __m256i l##r = z, h##r = z;
    ROWS(D2)
    const uint8_t* a = A;
    const uint8_t* b = B + c0 * 4;
    for (int64_t g = 0; g < kg; ++g) {
      const __m256i x0 = load_flip80(b), x1 = load_flip80(b + 32);
#define RW2(r) one_step2(l##r, h##r, x0, x1, a + 4 * r);
      ROWS(RW2) a += kMR * 4;
      b += kPanel * 4;
    }
#define O2(r) _mm256_storeu_si256((__m256i*)(out + (r)*64 + c0), l##r); _mm256_storeu_si256((__m256i*)(out + (r)*64 + c0 + 8), h##r);
    ROWS(O2)
  }
}
int main(int argc, char** argv) {
  int64_t kg = argc > 1 ? atoi(argv[1]) : 144;
  alignas(64) static uint8_t A[4096 * 24], B[4096 * 256];
  for (size_t i = 0; i < sizeof A; ++i) A[i] = (uint8_t)(rand() % 255 - 127);
  for (size_t i = 0; i < sizeof B; ++i) B[i] = 128 + rand() % 128;
  alignas(64) static int32_t o1[6 * 64], o2[6 * 64];
  old_tile(A, B, kg, 64, o1);
  asm_tile(A, B, kg, 64, o2);
  if (memcmp(o1, o2, sizeof o1)) { printf("MISMATCH\n"); return 1; }
  double best[2] = {1e9, 1e9};
  for (int rd = 0; rd < 9; ++rd)
    for (int v = 0; v < 2; ++v) {
      int reps = 20000;
      double t0 = ts();
      for (int i = 0; i < reps; ++i) {
        if (v == 0) old_tile(A, B, kg, 64, o1); else asm_tile(A, B, kg, 64, o2);
        asm volatile("" ::"r"(o1), "r"(o2) : "memory");
      }
      double t = (ts() - t0) / reps;
      if (t < best[v]) best[v] = t;
    }
  double mac = 6.0 * 64 * kg * 4;
  printf("kg=%ld 6x8 %.1f GMAC/s (%.2f steps/ns)  6x16 asm %.1f GMAC/s  6x16/6x8 time %.3f\n", (long)kg,
         mac / best[0] * 1e-9, mac / best[0] * 1e-9 / 32, mac / best[1] * 1e-9, best[1] / best[0]);
}
