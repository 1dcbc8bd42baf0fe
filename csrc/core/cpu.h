// Run-time CPU feature detection and the choice of kernel path (instruction set).
// The scalar path is always built and can be forced with ORTQUANT_ISA=scalar (or set_isa_override) for tests.
#pragma once
#include <string>

namespace ortquant {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

// The best path this CPU supports (AVX-512 means F+BW+DQ+VL).
Isa detected_isa();
// The path kernels use: the detected one, lowered by ORTQUANT_ISA in the environment (read once) or by
// set_isa_override(). A request above what the CPU supports is clamped to the detected path.
Isa active_isa();
void set_isa_override(Isa isa);
void clear_isa_override();
const char* isa_name(Isa isa);
// Parses "scalar", "avx2", "avx512", "avx512vnni" (case-insensitive). Returns false for anything else.
bool parse_isa(const std::string& name, Isa* out);

}  // namespace ortquant
