// Helpers for kernels compiled once per instruction set. A kernel family writes its loops once in an
// `*_impl.inc` file, and `*_scalar.cc`, `*_avx2.cc`, `*_avx512.cc` each include it inside their own namespace
// (ORTQUANT_ISA_NS). CMake gives each file its own -m flags (by file name); select_isa() picks one at run time.
// The scalar file is compiled without auto-vectorization and is the oracle the others are tested against.
#pragma once
#include "core/cpu.h"

namespace ortquant {

// Returns the function of the active ISA from a {scalar, avx2, avx512} triple (VNNI uses the AVX-512 one).
template <class Fn>
inline Fn select_isa(Fn scalar, Fn avx2, Fn avx512) {
  switch (active_isa()) {
    case Isa::kAvx512Vnni:
    case Isa::kAvx512: return avx512;
    case Isa::kAvx2: return avx2;
    case Isa::kScalar: break;
  }
  return scalar;
}

}  // namespace ortquant

#define ORTQUANT_DECLARE_ISA_FN(ret, name, params) \
  namespace scalar { ret name params; }             \
  namespace avx2 { ret name params; }               \
  namespace avx512 { ret name params; }
