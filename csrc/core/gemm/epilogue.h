// The fused GEMM epilogue: from the wrapped int32 accumulator of the sign-flipped product to the final output
// element. Scalar reference code here; the SIMD kernels implement the same float64 arithmetic lane by lane.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ortquant::gemm {

// What the epilogue writes.
enum class OutKind : uint8_t {
  kInt8,   // luna requant, saturate to [lo, hi], int8 (o_bits <= 8)
  kInt16,  // ... int16 (o_bits 9..16)
  kInt32,  // ... int32 (o_bits 17..32)
  kFloat,  // (sum + bias) * fscale, or / fdiv when fdiv != 0, rounded once to float32
  kRaw,    // the exact int32 sum, no bias, no scaling
};

struct Epilogue {
  OutKind kind = OutKind::kInt8;
  double ratio = 1.0;            // int kinds: q = floor((sum + bias) * ratio + 0.5), then saturated
  double lo = -128.0, hi = 127.0;
  double fscale = 1.0;           // float kind
  double fdiv = 0.0;             // float kind: divide by this instead when non-zero
  const int32_t* bias = nullptr; // per weight row (output feature / channel); may be null
  // A promise of the caller about the activations (not an output setting, but it travels with the call the same
  // way): when 0 <= x_max <= 127, every activation (either orientation) lies in [0, x_max], as integer mode's
  // stored codes of narrow quantizers do (integer::nonneg_codes). The AVX2 kernel then multiplies x * w with
  // vpmaddubsw directly (no sign step) and adds its int16 pair sums over as many k-groups as cannot overflow int16
  // (PackedWeights::max_abs) before widening. -1: no promise. A wrong promise gives wrong sums: only code that
  // produced the activations itself may make it.
  int32_t x_max = -1;
};
inline size_t out_elem_size(OutKind k) {
  switch (k) {
    case OutKind::kInt8: return 1;
    case OutKind::kInt16: return 2;
    default: return 4;
  }
}

// The exact dot product from the u8 x s8 accumulator: acc - 128 * rowsum(W), modulo 2^32.
inline int32_t corrected(int32_t acc, int32_t corr) {
  return static_cast<int32_t>(static_cast<uint32_t>(acc) - static_cast<uint32_t>(corr));
}

// Writes element idx of `out` (of kind ep.kind) from the exact sum t and the bias of its weight row. t is 64-bit
// for the transposed convolution's col2im sums (kRaw then keeps the low 32 bits).
inline void store_scalar_wide(const Epilogue& ep, int64_t t, int32_t bias, void* out, int64_t idx) {
  if (ep.kind == OutKind::kRaw) {
    static_cast<int32_t*>(out)[idx] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(t)));
    return;
  }
  const double v = static_cast<double>(t) + static_cast<double>(bias);
  if (ep.kind == OutKind::kFloat) {
    static_cast<float*>(out)[idx] = static_cast<float>(ep.fdiv != 0.0 ? v / ep.fdiv : v * ep.fscale);
    return;
  }
  double q = std::floor(v * ep.ratio + 0.5);
  q = q < ep.lo ? ep.lo : (q > ep.hi ? ep.hi : q);
  switch (ep.kind) {
    case OutKind::kInt8: static_cast<int8_t*>(out)[idx] = static_cast<int8_t>(q); break;
    case OutKind::kInt16: static_cast<int16_t*>(out)[idx] = static_cast<int16_t>(q); break;
    default: static_cast<int32_t*>(out)[idx] = static_cast<int32_t>(q); break;
  }
}

// The same for the GEMM's int32 sums.
inline void store_scalar(const Epilogue& ep, int32_t t, int32_t bias, void* out, int64_t idx) {
  store_scalar_wide(ep, t, bias, out, idx);
}

// When the requantization of ep can run in int32 with the same results: an integer kind whose ratio is 2^-shift
// (0 <= shift <= 30) with integer bounds inside int32, and whose sums (at most `products` products of magnitude
// <= 2^14 each) plus any of the `nbias` bias values plus the rounding half stay inside int32. Then
// floor((t + b) * 2^-shift + 0.5) = (t + b + half) >> shift exactly (t + b is an integer far below 2^53, so the
// float64 product and sum are exact; the arithmetic shift is the floor), and clamping after the shift equals
// clamping before the floor because the bounds are integers. Returns shift, or -1 (keep the float64 path).
// linger's luna_quant scales are powers of two, so its ratios scale_o / (scale_x * scale_w) are as well.
int exact_shift(const Epilogue& ep, const int32_t* bias, int64_t nbias, int64_t products);

}  // namespace ortquant::gemm
