// The inner loop of the AVX2 kernel for activations in [0, 127] with int16 sums (tile_nonneg with nonneg_flush > 1,
// csrc/core/gemm/kernel_avx2.cc), kernel loop only (no epilogue, one 64-pixel panel and one 6-row weight block in
// L1), thread CPU time, best of 9 rounds. Three copies of the loop:
//   old 6x8      8 pixels x 6 rows, 6 int16 + 6 int32 accumulators in registers (the tile before the 16-pixel one)
//   intrin 6x16  16 pixels x 6 rows in intrinsics, int32 sums in memory: GCC hoists the 6 broadcasts of a k-group
//                and spills the int16 accumulators every k-group
//   asm 6x16     the same with each row's step as one asm statement (nonneg_step_avx2.inc): what the kernel runs
// All three must agree bit for bit (checked before timing). Usage: micro_avx2_nonneg_tile [kgroups]
//   g++ -O3 -mavx2 -mfma -mbmi2 bench/micro_avx2_nonneg_tile.cc -o build/micro_avx2_nonneg_tile
#include <immintrin.h>
#include <time.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <initializer_list>
static double ts(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline int32_t load_i32(const void*p){int32_t v;memcpy(&v,p,4);return v;}
constexpr int kMR=6,kPanel=64;
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
// old 6x8
__attribute__((noinline)) void old_tile(const uint8_t*A,const uint8_t*B,int64_t kg,int64_t flush,int nr,int32_t*out){
  const __m256i z=_mm256_setzero_si256(),ones=_mm256_set1_epi16(1),flip=_mm256_set1_epi8((char)0x80);
  for(int c0=0;c0<nr;c0+=8){
#define D(r) __m256i acc##r=z,s##r=z;
    ROWS(D)
    const uint8_t*a=A;const uint8_t*b=B+c0*4;
    for(int64_t g0=0;g0<kg;g0+=flush){int64_t g1=kg-g0<flush?kg:g0+flush;
      for(int64_t g=g0;g<g1;++g){__m256i xv=_mm256_xor_si256(_mm256_load_si256((const __m256i*)b),flip);
#define RW(r) {__m256i wb=_mm256_set1_epi32(load_i32(a+4*r)); s##r=_mm256_add_epi16(s##r,_mm256_maddubs_epi16(xv,wb));}
        ROWS(RW) a+=kMR*4;b+=kPanel*4;}
#define FL(r) acc##r=_mm256_add_epi32(acc##r,_mm256_madd_epi16(s##r,ones)); s##r=z;
      ROWS(FL)}
#define O(r) _mm256_storeu_si256((__m256i*)(out+(r)*64+c0),acc##r);
    ROWS(O)
  }
}
// new 6x16, int32 acc in memory
__attribute__((noinline)) void new_tile(const uint8_t*A,const uint8_t*B,int64_t kg,int64_t flush,int nr,int32_t*out){
  const __m256i z=_mm256_setzero_si256(),ones=_mm256_set1_epi16(1),flip=_mm256_set1_epi8((char)0x80);
  for(int c0=0;c0<nr;c0+=16){
    alignas(32) __m256i acc[12];
    for(int i=0;i<12;++i)acc[i]=z;
#define D2(r) __m256i l##r=z,h##r=z;
    ROWS(D2)
    const uint8_t*a=A;const uint8_t*b=B+c0*4;
    for(int64_t g0=0;g0<kg;g0+=flush){int64_t g1=kg-g0<flush?kg:g0+flush;
      for(int64_t g=g0;g<g1;++g){__m256i x0=_mm256_xor_si256(_mm256_load_si256((const __m256i*)b),flip);
        __m256i x1=_mm256_xor_si256(_mm256_load_si256((const __m256i*)(b+32)),flip);
#define RW2(r) {__m256i wb=_mm256_set1_epi32(load_i32(a+4*r)); l##r=_mm256_add_epi16(l##r,_mm256_maddubs_epi16(x0,wb)); h##r=_mm256_add_epi16(h##r,_mm256_maddubs_epi16(x1,wb));}
        ROWS(RW2) a+=kMR*4;b+=kPanel*4;}
#define FL2(r) acc[2*r]=_mm256_add_epi32(acc[2*r],_mm256_madd_epi16(l##r,ones)); acc[2*r+1]=_mm256_add_epi32(acc[2*r+1],_mm256_madd_epi16(h##r,ones)); l##r=z;h##r=z;
      ROWS(FL2)}
    for(int r=0;r<6;++r){_mm256_storeu_si256((__m256i*)(out+r*64+c0),acc[2*r]);_mm256_storeu_si256((__m256i*)(out+r*64+c0+8),acc[2*r+1]);}
  }
}
__attribute__((noinline)) void asm_tile(const uint8_t*A,const uint8_t*B,int64_t kg,int64_t flush,int nr,int32_t*out){
  const __m256i z=_mm256_setzero_si256(),ones=_mm256_set1_epi16(1),flip=_mm256_set1_epi8((char)0x80);
  for(int c0=0;c0<nr;c0+=16){
    alignas(32) __m256i acc[12];
    for(int i=0;i<12;++i)acc[i]=z;
    ROWS(D2)
    const uint8_t*a=A;const uint8_t*b=B+c0*4;
    for(int64_t g0=0;g0<kg;g0+=flush){int64_t g1=kg-g0<flush?kg:g0+flush;
      for(int64_t g=g0;g<g1;++g){__m256i x0=_mm256_xor_si256(_mm256_load_si256((const __m256i*)b),flip);
        __m256i x1=_mm256_xor_si256(_mm256_load_si256((const __m256i*)(b+32)),flip);
#define RW3(r) { __m256i t,u; asm("vpbroadcastd %[w], %[t]\n\tvpmaddubsw %[t], %[x0], %[u]\n\tvpaddw %[u], %[l], %[l]\n\tvpmaddubsw %[t], %[x1], %[t]\n\tvpaddw %[t], %[h], %[h]" : [l]"+x"(l##r), [h]"+x"(h##r), [t]"=&x"(t), [u]"=&x"(u) : [x0]"x"(x0), [x1]"x"(x1), [w]"m"(*(const int32_t*)(a+4*r))); }
        ROWS(RW3) a+=kMR*4;b+=kPanel*4;}
      ROWS(FL2)}
    for(int r=0;r<6;++r){_mm256_storeu_si256((__m256i*)(out+r*64+c0),acc[2*r]);_mm256_storeu_si256((__m256i*)(out+r*64+c0+8),acc[2*r+1]);}
  }
}
int main(int argc,char**argv){
  int64_t kg=argc>1?atoi(argv[1]):72; 
  alignas(64) static uint8_t A[4096*24],B[4096*256]; for(size_t i=0;i<sizeof A;++i)A[i]=rand()%64-32; for(size_t i=0;i<sizeof B;++i)B[i]=128+rand()%16;
  alignas(64) static int32_t o1[6*64],o2[6*64];
  for(int64_t flush: {2,8,136}){
    old_tile(A,B,kg,flush,64,o1);new_tile(A,B,kg,flush,64,o2);
    if(memcmp(o1,o2,sizeof o1)){printf("MISMATCH\n");return 1;}
    double best[3]={1e9,1e9,1e9}; asm_tile(A,B,kg,flush,64,o2); if(memcmp(o1,o2,sizeof o1)){printf("MISMATCH asm\n");return 1;}
    for(int rd=0;rd<9;++rd)for(int v=0;v<3;++v){int reps=20000;double t0=ts();
      for(int i=0;i<reps;++i){ if(v==0)old_tile(A,B,kg,flush,64,o1); else if(v==1) new_tile(A,B,kg,flush,64,o2); else asm_tile(A,B,kg,flush,64,o2); asm volatile(""::"r"(o1),"r"(o2):"memory");}
      double t=(ts()-t0)/reps; if(t<best[v])best[v]=t;}
    double mac=6.0*64*kg*4;
    printf("kg=%ld flush=%ld old 6x8 %.1f  intrin 6x16 %.1f  asm 6x16 %.1f GMAC/s  asm/old time %.3f\n",kg,flush,mac/best[0]*1e-9,mac/best[1]*1e-9,mac/best[2]*1e-9,best[2]/best[0]);
  }
}
