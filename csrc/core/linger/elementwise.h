// Engines of the int8 elementwise linger ops, dispatched to the active ISA:
//   UnaryI8   int8 -> int8 map: a power-of-two requantization run as a vector shift, or a 256-entry table
//             (any other function of one int8: non-power-of-two ratios, clamps, a float constant operand).
//   BinaryI8  (int8, int8) -> int8 map with numpy broadcasting: vector shift-add / shift-multiply for
//             power-of-two ratios, or a 65,536-entry table for everything else (exact by construction).
// Tables are built once at kernel creation, so any per-element float arithmetic the definition needs runs
// only 256 or 65,536 times per node.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/requant.h"
#include "core/shape.h"

namespace ortquant::linger {

class UnaryI8 {
 public:
  UnaryI8() : UnaryI8(0) {}
  // y = saturate8(sh(x, e)).
  explicit UnaryI8(int e);
  // y = saturate8(r(x)) (luna requantization by a ratio).
  static UnaryI8 requant(const luna::Rescale& r);
  // y = fn(x), tabulated.
  static UnaryI8 from_fn(const std::function<int8_t(int8_t)>& fn);

  bool identity() const { return !table_mode_ && e_ == 0; }
  int8_t operator()(int8_t x) const;
  void run(const int8_t* x, int8_t* y, int64_t n) const;

 private:
  bool table_mode_ = false;
  int e_ = 0;
  std::vector<int8_t> table_;  // 256 entries, index x + 128
};

class BinaryI8 {
 public:
  // z = saturate8(sh(x, ex) + sh(y, ey)) (falls back to a table outside the vector shift range).
  static BinaryI8 add_shift(int ex, int ey);
  // z = saturate8(sh(x * y, e)).
  static BinaryI8 mul_shift(int e);
  static BinaryI8 from_fn(const std::function<int8_t(int8_t, int8_t)>& fn);

  int8_t operator()(int8_t x, int8_t y) const;
  // One row segment; xs, ys are 0 or 1.
  void run_segment(const int8_t* x, int64_t xs, const int8_t* y, int64_t ys, int8_t* z, int64_t n) const;
  // The flat output range [begin, end) of a broadcast (plan over the shapes of x and y).
  void run(const BroadcastPlan& plan, const int8_t* x, const int8_t* y, int8_t* z, int64_t begin, int64_t end) const;

 private:
  enum class Kind { kAdd, kMul, kTable };
  Kind kind_ = Kind::kTable;
  int ex_ = 0, ey_ = 0;
  std::vector<int8_t> table_;  // 65,536 entries, index (uint8(x) << 8) | uint8(y)
};

// Dispatching wrappers over the per-ISA loops (elementwise_kernels.h).
void quant_f32_to_i8(const float* x, int8_t* y, int64_t n, float scale, float lo, float hi);
void quant_f32_to_i16(const float* x, int16_t* y, int64_t n, float scale, float lo, float hi);
template <class T>
void dequant_to_f32(const T* x, float* y, int64_t n, float scale);  // T = int8_t, int16_t, int32_t
// y = saturate(sh(x, e)) for int8/int16 in and out; any e (out-of-range shifts use the exact scalar path).
template <class Ti, class To>
void shift_requant(const Ti* x, To* y, int64_t n, int e);

}  // namespace ortquant::linger
