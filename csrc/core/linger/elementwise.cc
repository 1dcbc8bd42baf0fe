#include "core/linger/elementwise.h"

#include <type_traits>

#include "core/linger/elementwise_kernels.h"

namespace ortquant::linger {
namespace {

bool in_vector_range(int e) { return e >= kMinShift && e <= kMaxShift; }

// The exact scalar form of sh(v, e) followed by int8 saturation.
int8_t shift_sat8(int64_t v, int e) { return luna::saturate_to<int8_t>(luna::rhu(v, -e)); }

}  // namespace

// ---- UnaryI8 ---------------------------------------------------------------------------------------------

UnaryI8::UnaryI8(int e) : e_(e) {
  if (!in_vector_range(e)) *this = from_fn([e](int8_t x) { return shift_sat8(x, e); });
}

UnaryI8 UnaryI8::requant(const luna::Rescale& r) {
  if (r.pow2) return UnaryI8(r.shift);
  return from_fn([r](int8_t x) { return luna::saturate_to<int8_t>(r(x)); });
}

UnaryI8 UnaryI8::from_fn(const std::function<int8_t(int8_t)>& fn) {
  UnaryI8 u;
  u.table_mode_ = true;
  u.table_.resize(256);
  for (int v = -128; v <= 127; ++v) u.table_[static_cast<size_t>(v + 128)] = fn(static_cast<int8_t>(v));
  return u;
}

int8_t UnaryI8::operator()(int8_t x) const {
  if (table_mode_) return table_[static_cast<size_t>(int(x) + 128)];
  return shift_sat8(x, e_);
}

void UnaryI8::run(const int8_t* x, int8_t* y, int64_t n) const {
  if (table_mode_) {
    select_isa(&scalar::lut_i8, &avx2::lut_i8, &avx512::lut_i8)(x, y, n, table_.data());
  } else {
    select_isa(&scalar::shift_i8_i8, &avx2::shift_i8_i8, &avx512::shift_i8_i8)(x, y, n, e_);
  }
}

// ---- BinaryI8 --------------------------------------------------------------------------------------------

BinaryI8 BinaryI8::add_shift(int ex, int ey) {
  if (in_vector_range(ex) && in_vector_range(ey)) {
    BinaryI8 b;
    b.kind_ = Kind::kAdd;
    b.ex_ = ex;
    b.ey_ = ey;
    return b;
  }
  return from_fn([ex, ey](int8_t x, int8_t y) {
    const int64_t a = luna::rhu(x, -ex), c = luna::rhu(y, -ey);
    // Both are saturated int64 values; add without overflow.
    const int64_t s = (a > 0 && c > INT64_MAX - a) ? INT64_MAX : (a < 0 && c < INT64_MIN - a) ? INT64_MIN : a + c;
    return luna::saturate_to<int8_t>(s);
  });
}

BinaryI8 BinaryI8::mul_shift(int e) {
  if (in_vector_range(e)) {
    BinaryI8 b;
    b.kind_ = Kind::kMul;
    b.ex_ = e;
    return b;
  }
  return from_fn([e](int8_t x, int8_t y) { return shift_sat8(int64_t(x) * y, e); });
}

BinaryI8 BinaryI8::from_fn(const std::function<int8_t(int8_t, int8_t)>& fn) {
  BinaryI8 b;
  b.kind_ = Kind::kTable;
  b.table_.resize(65536);
  for (int a = 0; a < 256; ++a)
    for (int c = 0; c < 256; ++c)
      b.table_[static_cast<size_t>((a << 8) | c)] = fn(static_cast<int8_t>(a), static_cast<int8_t>(c));
  return b;
}

int8_t BinaryI8::operator()(int8_t x, int8_t y) const {
  int8_t z;
  run_segment(&x, 1, &y, 1, &z, 1);
  return z;
}

void BinaryI8::run_segment(const int8_t* x, int64_t xs, const int8_t* y, int64_t ys, int8_t* z, int64_t n) const {
  switch (kind_) {
    case Kind::kAdd:
      select_isa(&scalar::add_shift_i8, &avx2::add_shift_i8, &avx512::add_shift_i8)(x, xs, y, ys, z, n, ex_, ey_);
      return;
    case Kind::kMul:
      select_isa(&scalar::mul_shift_i8, &avx2::mul_shift_i8, &avx512::mul_shift_i8)(x, xs, y, ys, z, n, ex_);
      return;
    case Kind::kTable:
      select_isa(&scalar::lut2_i8, &avx2::lut2_i8, &avx512::lut2_i8)(x, xs, y, ys, z, n, table_.data());
      return;
  }
}

void BinaryI8::run(const BroadcastPlan& plan, const int8_t* x, const int8_t* y, int8_t* z, int64_t begin,
                   int64_t end) const {
  for_each_segment(plan, begin, end, [&](int64_t o, const int64_t* offs, int64_t n, const int64_t* st) {
    run_segment(x + offs[0], st[0], y + offs[1], st[1], z + o, n);
  });
}

// ---- dispatching wrappers --------------------------------------------------------------------------------

void quant_f32_to_i8(const float* x, int8_t* y, int64_t n, float scale, float lo, float hi) {
  select_isa(&scalar::quant_f32_i8, &avx2::quant_f32_i8, &avx512::quant_f32_i8)(x, y, n, scale, lo, hi);
}

void quant_f32_to_i16(const float* x, int16_t* y, int64_t n, float scale, float lo, float hi) {
  select_isa(&scalar::quant_f32_i16, &avx2::quant_f32_i16, &avx512::quant_f32_i16)(x, y, n, scale, lo, hi);
}

template <class T>
void dequant_to_f32(const T* x, float* y, int64_t n, float scale) {
  // Dividing by a power of two equals multiplying by its reciprocal when that reciprocal is a normal float.
  int e = 0;
  const bool mul = luna::pow2_exponent(scale, &e) && e > -126 && e < 126;
  const float s = mul ? 1.0f / scale : scale;
  if constexpr (std::is_same_v<T, int8_t>) {
    select_isa(&scalar::dequant_i8_f32, &avx2::dequant_i8_f32, &avx512::dequant_i8_f32)(x, y, n, s, mul);
  } else if constexpr (std::is_same_v<T, int16_t>) {
    select_isa(&scalar::dequant_i16_f32, &avx2::dequant_i16_f32, &avx512::dequant_i16_f32)(x, y, n, s, mul);
  } else {
    static_assert(std::is_same_v<T, int32_t>, "dequant_to_f32: int8, int16 or int32");
    select_isa(&scalar::dequant_i32_f32, &avx2::dequant_i32_f32, &avx512::dequant_i32_f32)(x, y, n, s, mul);
  }
}
template void dequant_to_f32<int8_t>(const int8_t*, float*, int64_t, float);
template void dequant_to_f32<int16_t>(const int16_t*, float*, int64_t, float);
template void dequant_to_f32<int32_t>(const int32_t*, float*, int64_t, float);

template <class Ti, class To>
void shift_requant(const Ti* x, To* y, int64_t n, int e) {
  if (!in_vector_range(e)) {
    for (int64_t i = 0; i < n; ++i) y[i] = luna::saturate_to<To>(luna::rhu(x[i], -e));
    return;
  }
  if constexpr (std::is_same_v<Ti, int8_t> && std::is_same_v<To, int8_t>) {
    select_isa(&scalar::shift_i8_i8, &avx2::shift_i8_i8, &avx512::shift_i8_i8)(x, y, n, e);
  } else if constexpr (std::is_same_v<Ti, int8_t> && std::is_same_v<To, int16_t>) {
    select_isa(&scalar::shift_i8_i16, &avx2::shift_i8_i16, &avx512::shift_i8_i16)(x, y, n, e);
  } else if constexpr (std::is_same_v<Ti, int16_t> && std::is_same_v<To, int8_t>) {
    select_isa(&scalar::shift_i16_i8, &avx2::shift_i16_i8, &avx512::shift_i16_i8)(x, y, n, e);
  } else {
    static_assert(std::is_same_v<Ti, int16_t> && std::is_same_v<To, int16_t>, "shift_requant: int8/int16");
    select_isa(&scalar::shift_i16_i16, &avx2::shift_i16_i16, &avx512::shift_i16_i16)(x, y, n, e);
  }
}
template void shift_requant<int8_t, int8_t>(const int8_t*, int8_t*, int64_t, int);
template void shift_requant<int8_t, int16_t>(const int8_t*, int16_t*, int64_t, int);
template void shift_requant<int16_t, int8_t>(const int16_t*, int8_t*, int64_t, int);
template void shift_requant<int16_t, int16_t>(const int16_t*, int16_t*, int64_t, int);

}  // namespace ortquant::linger
