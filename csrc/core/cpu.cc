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

// The override: an Isa value, kAvxVnniPath for the "avxvnni" path, -1 for none.
constexpr int kAvxVnniPath = 100;
std::atomic<int> g_override{-1};

std::string lower(const std::string& s) {
  std::string n;
  for (char c : s) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return n;
}

bool parse_path(const std::string& name, int* out) {
  if (lower(name) == "avxvnni") {
    *out = kAvxVnniPath;
    return true;
  }
  Isa isa;
  if (!parse_isa(name, &isa)) return false;
  *out = static_cast<int>(isa);
  return true;
}

int env_override() {
  static const int value = [] {
    const char* s = std::getenv("ORTQUANT_ISA");
    int path;
    if (s != nullptr && parse_path(s, &path)) return path;
    return -1;
  }();
  return value;
}

int current_override() {
  const int o = g_override.load(std::memory_order_relaxed);
  return o < 0 ? env_override() : o;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

bool isa_emulated() {
#if defined(ORTQUANT_EMULATE_ISAS)
  return true;
#else
  return false;
#endif
}

Isa max_isa() {
  // The emulated kernels still need AVX2 (they are compiled with the avx2 files' flags).
  if (isa_emulated() && detected_isa() >= Isa::kAvx2) return Isa::kAvx512Vnni;
  return detected_isa();
}

bool cpu_has_avxvnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool v = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return v;
#else
  return false;
#endif
}

Isa active_isa() {
  const Isa best = detected_isa();
  int o = current_override();
  if (o == kAvxVnniPath) o = static_cast<int>(Isa::kAvx2);
  if (o < 0) return best;
  return static_cast<Isa>(std::min(static_cast<int>(max_isa()), o));
}

void set_isa_override(Isa isa) { g_override.store(static_cast<int>(isa), std::memory_order_relaxed); }
void clear_isa_override() { g_override.store(-1, std::memory_order_relaxed); }

bool set_path_override(const std::string& name) {
  int path;
  if (!parse_path(name, &path)) return false;
  g_override.store(path, std::memory_order_relaxed);
  return true;
}

bool path_native(const std::string& name) {
  int path;
  if (!parse_path(name, &path)) return false;
  if (path == kAvxVnniPath) return detected_isa() >= Isa::kAvx2 && cpu_has_avxvnni();
  return path <= static_cast<int>(detected_isa());
}

bool path_available(const std::string& name) {
  if (path_native(name)) return true;
  int path;
  if (!isa_emulated() || !parse_path(name, &path)) return false;
  if (path == kAvxVnniPath) return max_isa() >= Isa::kAvx2;
  return path <= static_cast<int>(max_isa());
}

bool avxvnni_selected() { return current_override() == kAvxVnniPath && path_available("avxvnni"); }

const char* active_path_name() { return avxvnni_selected() ? "avxvnni" : isa_name(active_isa()); }

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
  const std::string n = lower(name);
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
    if (n == isa_name(i)) {
      *out = i;
      return true;
    }
  }
  return false;
}

}  // namespace ortquant
