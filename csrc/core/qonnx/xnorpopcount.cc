#include "core/qonnx/xnorpopcount.h"

#include "core/error.h"
#include "core/qonnx/xnorpopcount_kernels.h"

namespace ortquant::qonnx {
namespace {

// 0 for +-0, 1 for 1, -1 for anything else (NaN included).
inline int bit_of(float v) { return v == 0.f ? 0 : (v == 1.f ? 1 : -1); }

[[noreturn]] void bad_value(const char* what, float v, int64_t row, int64_t col) {
  throw_error(what, " must hold only 0 and 1 (binary values), found ", v, " at row ", row, ", column ", col);
}

}  // namespace

bool pack_bit_rows(const float* a, int64_t k, int64_t r0, int64_t r1, uint64_t* out) {
  auto fn = select_isa(&scalar::pack_bits_row, &avx2::pack_bits_row, &avx512::pack_bits_row);
  const int64_t words = bit_words(k);
  bool ok = true;
  for (int64_t r = r0; r < r1; ++r) ok &= fn(a + r * k, k, out + r * words);
  return ok;
}

void check_binary(const float* a, int64_t rows, int64_t k, const char* what) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i)
      if (bit_of(a[r * k + i]) < 0) bad_value(what, a[r * k + i], r, i);
}

BitRows pack_bit_columns(const float* b, int64_t k, int64_t n, const char* what) {
  BitRows t;
  t.rows = n;
  t.bits = k;
  t.words = bit_words(k);
  t.data.assign(static_cast<size_t>(n * t.words), 0);
  for (int64_t i = 0; i < k; ++i) {
    const float* row = b + i * n;
    const int64_t w = i / 64;
    const uint64_t bit = uint64_t{1} << (i % 64);
    for (int64_t j = 0; j < n; ++j) {
      const int v = bit_of(row[j]);
      if (v < 0) bad_value(what, row[j], i, j);
      if (v) t.data[static_cast<size_t>(j * t.words + w)] |= bit;
    }
  }
  return t;
}

void xnor_popcount(const uint64_t* a, const BitRows& b, int64_t m0, int64_t m1, float* y) {
  auto fn = select_isa(&scalar::xnor_popcount_row, &avx2::xnor_popcount_row, &avx512::xnor_popcount_row);
  for (int64_t m = m0; m < m1; ++m) fn(a + m * b.words, b.data.data(), b.rows, b.words, b.bits, y + m * b.rows);
}

}  // namespace ortquant::qonnx
