// Overflow-checked size arithmetic for everything computed from a model (attributes, shapes, constants) and the
// library's explicit size limits (docs/ops.md "Limits and the error contract"). A model is untrusted input: a
// size that overflows int64 or exceeds a limit is an Error naming what was being computed, never undefined
// behaviour, a SIGFPE or a multi-gigabyte allocation that ends in a bare std::bad_alloc.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace ortquant {

// ---- limits (documented in docs/ops.md) ----------------------------------------------------------------------
// Bytes one output tensor or one scratch buffer of one node may take.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 32;  // 4 GiB
// Convolution strides (Conv2dInt, Conv1dInt, ConvTranspose2dInt, depthwise), in both dimensions.
constexpr int64_t kMaxConvStride = 64;
// Pads, dilations, pooling strides, kernel sizes and similar geometry attributes, in every dimension.
constexpr int64_t kMaxGeometry = int64_t{1} << 16;  // 65,536

// ---- checked int64 arithmetic: throw Error "<what>: ... overflows int64" ------------------------------------
[[noreturn]] void throw_overflow(const char* what, const char* op, int64_t a, int64_t b);

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw_overflow(what, "+", a, b);
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw_overflow(what, "-", a, b);
  return r;
}
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw_overflow(what, "*", a, b);
  return r;
}
// Division that never traps: a zero divisor or INT64_MIN / -1 is an Error naming `what`.
int64_t checked_div(int64_t a, int64_t b, const char* what);
// floor(a / b) for b > 0 (rounds toward -infinity, unlike C++ '/', which truncates toward zero).
int64_t floor_div(int64_t a, int64_t b, const char* what);
// ceil(a / b) for b > 0.
int64_t ceil_div(int64_t a, int64_t b, const char* what);

// Product of dims (each must be >= 0); Error naming `what` on a negative dim or overflow.
int64_t checked_product(const int64_t* dims, size_t n, const char* what);

// count * elem_bytes, checked against overflow and kMaxTensorBytes; Error "<what> would take N bytes, more than
// the limit of 4294967296 bytes". Use for every buffer whose size comes from a model.
int64_t checked_bytes(int64_t count, int64_t elem_bytes, const char* what);

// The last size checked_bytes accepted on this thread, so that a std::bad_alloc that still happens (the host is
// short of memory, RLIMIT_AS) is reported with the size and what it was for. `what` must outlive the call site
// only as a string literal or a string owned by the note (it is copied into a thread-local buffer).
struct AllocationNote {
  const char* what = nullptr;  // null: nothing recorded since clear_allocation_note()
  int64_t bytes = 0;
};
AllocationNote last_allocation();
void clear_allocation_note();

// Throws Error "attribute '<attr>' ... must be in [lo, hi], got v" (the dimension named by `dim` when not null).
void check_range(const char* attr, int64_t v, int64_t lo, int64_t hi, const char* dim = nullptr);

}  // namespace ortquant
