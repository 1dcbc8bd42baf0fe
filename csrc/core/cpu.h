// Run-time CPU feature detection and the choice of kernel path (instruction set).
// The scalar path is always built and can be forced with ORTQUANT_ISA=scalar (or set_isa_override) for tests.
#pragma once
#include <string>

namespace ortquant {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

// The best path this CPU supports (AVX-512 means F+BW+DQ+VL).
Isa detected_isa();
// The best path this build can select: detected_isa(), or kAvx512Vnni in a build that emulates the instruction
// sets the CPU lacks (CMake option ORTQUANT_EMULATE_ISAS: the AVX-512, AVX-512 VNNI and AVX-VNNI kernel files
// compiled against SIMDe, for tests; see core/simd.h).
Isa max_isa();
bool isa_emulated();  // whether this is such a build
// The path kernels use: the detected one, lowered by ORTQUANT_ISA in the environment (read once) or by
// set_isa_override(). A request above max_isa() is clamped to it (so, normally, to the detected path).
Isa active_isa();
void set_isa_override(Isa isa);
void clear_isa_override();
const char* isa_name(Isa isa);
// Parses "scalar", "avx2", "avx512", "avx512vnni" (case-insensitive). Returns false for anything else.
bool parse_isa(const std::string& name, Isa* out);

// Kernel paths by name, as ORTQUANT_ISA and set_isa take them: the Isa levels above plus "avxvnni", the avx2 level
// with the AVX-VNNI GEMM kernel (what CPUs with AVX-VNNI but no AVX-512 run). set_path_override() returns false
// for an unknown name; path_available() tells whether a path can be selected here (natively, or emulated).
bool set_path_override(const std::string& name);
bool path_available(const std::string& name);
bool path_native(const std::string& name);  // the CPU itself has it
bool cpu_has_avxvnni();
// Whether the "avxvnni" path is in force (requested and available): the GEMM uses AVX-VNNI at the avx2 level.
bool avxvnni_selected();
// The active path's name: isa_name(active_isa()), or "avxvnni" when avxvnni_selected().
const char* active_path_name();

}  // namespace ortquant
