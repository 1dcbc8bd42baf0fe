#include "core/cpu.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

namespace ortquant {
namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) return Isa::kAvx512Vnni;
  if (avx512) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("bmi2"))
    return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

// -1: no override.
std::atomic<int> g_override{-1};

int env_override() {
  static const int value = [] {
    const char* s = std::getenv("ORTQUANT_ISA");
    Isa isa;
    if (s != nullptr && parse_isa(s, &isa)) return static_cast<int>(isa);
    return -1;
  }();
  return value;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  int best = static_cast<int>(detected_isa());
  int o = g_override.load(std::memory_order_relaxed);
  if (o < 0) o = env_override();
  if (o >= 0) best = std::min(best, o);
  return static_cast<Isa>(best);
}

void set_isa_override(Isa isa) { g_override.store(static_cast<int>(isa), std::memory_order_relaxed); }
void clear_isa_override() { g_override.store(-1, std::memory_order_relaxed); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool parse_isa(const std::string& name, Isa* out) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
    if (n == isa_name(i)) {
      *out = i;
      return true;
    }
  }
  return false;
}

}  // namespace ortquant
