// Per-ISA entry points of the float64-parameter Quant row loop (see core/isa.h and wide_params.cc).
#pragma once
#include <cstdint>

#include "core/isa.h"

namespace ortquant::qonnx {

// Quant ROUND of one contiguous float32 row x[0..n) with a float64 scale sv and zero point zv constant along it, as
// numpy computes it (qonnx with float64 parameters): d = x / s (float32 / float32 when div_f32, else float64),
// + z, clamped to [lo, hi] (|lo|, |hi| <= 2^51), rounded half to even, then (q - z) * s in float64, to float32.
// The vector paths divide by a power-of-two scale as a multiplication by its exact reciprocal (the same value);
// the scalar path is the literal formula. Same bits on every path.
ORTQUANT_DECLARE_ISA_FN(void, int_quant_wide_round_row,
                        (const float* x, int64_t n, double sv, double zv, double lo, double hi, bool div_f32,
                         float* y))

}  // namespace ortquant::qonnx
