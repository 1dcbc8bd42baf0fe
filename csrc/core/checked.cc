#include "core/checked.h"

#include <cstring>

namespace ortquant {

namespace {
thread_local char t_note_what[160];
thread_local AllocationNote t_note;
}  // namespace

AllocationNote last_allocation() { return t_note; }
void clear_allocation_note() { t_note = AllocationNote(); }

void throw_overflow(const char* what, const char* op, int64_t a, int64_t b) {
  throw_error(what, ": ", a, " ", op, " ", b, " overflows int64 (the model's sizes are absurd)");
}

int64_t checked_div(int64_t a, int64_t b, const char* what) {
  if (b == 0) throw_error(what, ": division by zero");
  if (a == INT64_MIN && b == -1) throw_overflow(what, "/", a, b);
  return a / b;
}

int64_t floor_div(int64_t a, int64_t b, const char* what) {
  if (b <= 0) throw_error(what, ": divisor ", b, " must be positive");
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t ceil_div(int64_t a, int64_t b, const char* what) {
  if (b <= 0) throw_error(what, ": divisor ", b, " must be positive");
  const int64_t q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}

int64_t checked_product(const int64_t* dims, size_t n, const char* what) {
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i) {
    if (dims[i] < 0) throw_error(what, ": negative dimension ", dims[i]);
    p = checked_mul(p, dims[i], what);
  }
  return p;
}

int64_t checked_bytes(int64_t count, int64_t elem_bytes, const char* what) {
  if (count < 0) throw_error(what, ": negative element count ", count);
  const int64_t bytes = checked_mul(count, elem_bytes, what);
  std::strncpy(t_note_what, what, sizeof(t_note_what) - 1);
  t_note_what[sizeof(t_note_what) - 1] = '\0';
  t_note.what = t_note_what;
  t_note.bytes = bytes;
  if (bytes > kMaxTensorBytes)
    throw_error(what, " would take ", bytes, " bytes, more than the limit of ", kMaxTensorBytes,
                " bytes per tensor (docs/ops.md, Limits)");
  return bytes;
}

void check_range(const char* attr, int64_t v, int64_t lo, int64_t hi, const char* dim) {
  if (v >= lo && v <= hi) return;
  if (dim != nullptr)
    throw_error("attribute '", attr, "' (", dim, ") must be in [", lo, ", ", hi, "], got ", v,
                v > hi ? " (limit, docs/ops.md)" : "");
  throw_error("attribute '", attr, "' must be in [", lo, ", ", hi, "], got ", v, v > hi ? " (limit, docs/ops.md)" : "");
}

}  // namespace ortquant
