// QONNX XnorPopcountMatMul (qonnx.custom_op.general), spec: shared/specs/qonnx.md section 6.
//   A (..., K) and B (K, N) hold bits as float 0/1; Y[..., n] = number of k where A[..., k] == B[k, n]
// qonnx computes (matmul(2A - 1, 2B - 1) + K) / 2, which is exactly that count for binary inputs. Here the bits
// are packed 64 to a word and Y = K - popcount(a XOR b); any value other than 0 (either sign) or 1 is an error.
#pragma once
#include <cstdint>
#include <vector>

namespace ortquant::qonnx {

// Rows of bits, 64 per word, each row padded with zero bits to `words` words.
struct BitRows {
  int64_t rows = 0;
  int64_t bits = 0;   // K
  int64_t words = 0;  // ceil(K / 64)
  std::vector<uint64_t> data;
};

inline int64_t bit_words(int64_t k) { return (k + 63) / 64; }

// Packs rows [r0, r1) of a row-major (rows, k) float matrix into out (row r at out + r * words). Returns false
// when an element is not 0 or 1 (does not throw, so it can run in parallel tasks).
bool pack_bit_rows(const float* a, int64_t k, int64_t r0, int64_t r1, uint64_t* out);

// Throws Error naming `what` and the first element of the (rows, k) matrix that is not 0 or 1.
void check_binary(const float* a, int64_t rows, int64_t k, const char* what);

// Packs the columns of a row-major (k, n) float matrix: column j becomes row j.
BitRows pack_bit_columns(const float* b, int64_t k, int64_t n, const char* what);

// y[m * N + j] = K - popcount(a_m XOR b_j) for m in [m0, m1), a_m at a + m * b.words.
void xnor_popcount(const uint64_t* a, const BitRows& b, int64_t m0, int64_t m1, float* y);

}  // namespace ortquant::qonnx
