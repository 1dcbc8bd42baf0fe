// Unit test of core/shape.h's Shape (the inline / heap storage): every operation the code uses, across the inline
// capacity in both directions, against std::vector<int64_t> doing the same. Exit status 0 when all agree; the first
// difference is printed. Run by tests/core/test_core.py (built by CMake as ortquant_core_test).
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/shape.h"

namespace {

int g_failures = 0;

void expect_same(const ortquant::Shape& s, const std::vector<int64_t>& v, const std::string& what) {
  bool same = s.size() == v.size() && s.empty() == v.empty() && s == v;
  for (size_t i = 0; same && i < v.size(); ++i) same = s[i] == v[i] && s.data()[i] == v[i] && s.at(i) == v[i];
  if (same && !v.empty()) same = s.front() == v.front() && s.back() == v.back();
  if (same && std::vector<int64_t>(s) != v) same = false;
  if (!same) {
    ++g_failures;
    std::printf("FAIL %s: got %s, want %zu values\n", what.c_str(), ortquant::shape_str(s).c_str(), v.size());
  }
}

void operations_match_a_vector() {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 4000; ++round) {
    ortquant::Shape s;
    std::vector<int64_t> v;
    for (int step = 0; step < 30; ++step) {
      const int op = static_cast<int>(rng() % 10);
      const auto val = static_cast<int64_t>(rng() % 1000) - 500;
      const size_t n = static_cast<size_t>(rng() % 14);
      std::string what = "round " + std::to_string(round) + " step " + std::to_string(step) + " op " + std::to_string(op);
      switch (op) {
        case 0: s.push_back(val), v.push_back(val); break;
        case 1:
          if (!v.empty()) s.pop_back(), v.pop_back();
          break;
        case 2: s.resize(n, val), v.resize(n, val); break;
        case 3: s.assign(n, val), v.assign(n, val); break;
        case 4: {  // from a sub-range of itself (aliasing)
          const size_t a = v.empty() ? 0 : rng() % v.size(), b = v.empty() ? 0 : a + rng() % (v.size() - a + 1);
          s.assign(s.begin() + a, s.begin() + b);
          v = std::vector<int64_t>(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b));
          break;
        }
        case 5: {
          const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
          s.insert(s.begin() + at, val);
          v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), val);
          break;
        }
        case 6:
          if (!v.empty()) {
            const size_t at = rng() % v.size();
            s.erase(s.begin() + at);
            v.erase(v.begin() + static_cast<std::ptrdiff_t>(at));
          }
          break;
        case 7: {  // copies and moves, into shapes of either storage
          ortquant::Shape other(static_cast<size_t>(rng() % 12), 9);
          other = s;
          expect_same(other, v, what + " copy-assigned");
          ortquant::Shape moved(std::move(other));
          expect_same(moved, v, what + " move-constructed");
          ortquant::Shape target(static_cast<size_t>(rng() % 12), 3);
          target = std::move(moved);
          expect_same(target, v, what + " move-assigned");
          s = target;
          break;
        }
        case 8: {  // from and to a vector
          std::vector<int64_t> w(n);
          for (auto& x : w) x = static_cast<int64_t>(rng() % 100);
          s = w;
          v = w;
          break;
        }
        case 9: s.clear(), v.clear(); break;
        default: break;
      }
      expect_same(s, v, what);
      if (g_failures > 5) return;
    }
  }
}

void literals_and_comparisons() {
  const ortquant::Shape a{1, 2, 3};
  expect_same(a, {1, 2, 3}, "initializer list");
  const ortquant::Shape b(4, 7);
  expect_same(b, {7, 7, 7, 7}, "count and value");
  const ortquant::Shape big{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  expect_same(big, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, "initializer list past the inline capacity");
  if (!(a != big) || !(a < big) || a == b || ortquant::shape_size(big) != 39916800) {
    ++g_failures;
    std::printf("FAIL comparisons or shape_size\n");
  }
}

}  // namespace

int main() {
  operations_match_a_vector();
  literals_and_comparisons();
  if (g_failures) {
    std::printf("%d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
