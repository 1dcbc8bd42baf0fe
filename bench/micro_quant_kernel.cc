// Kernel-only timing of the Quant inner loop, without onnxruntime or Python: per-call minimum and 10th
// percentile over many short calls (robust against other load on a shared machine). Compares a power-of-two
// scale (2^-4: the vector paths multiply by the exact reciprocal) with its one-ulp neighbour (true division),
// on every ISA path. Not built by CMake; after `make build`:
//
//   g++ -O2 -std=c++17 -Icsrc bench/micro_quant_kernel.cc build/libortquant_core.a -o build/micro_quant_kernel
//   build/micro_quant_kernel [N=4096] [CALLS=20000]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/qonnx/quant.h"

using namespace ortquant;

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 4096;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (float& v : x) v = dist(gen);
  const float zero = 0.f;
  const qonnx::IntQuantBounds bounds = qonnx::int_quant_bounds(true, false, 8.f);
  const float scales[2] = {0.0625f, std::nextafter(0.0625f, 1.0f)};
  std::printf("n=%ld floats per call, 8-bit signed, ROUND; ns per element\n", n);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    set_isa_override(isa);
    if (active_isa() != isa) continue;
    std::vector<double> t[2];
    const int c_max = isa == Isa::kScalar ? calls / 50 : calls;
    for (int c = 0; c < c_max; ++c) {
      for (int k = 0; k < 2; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        qonnx::int_quant_segment(x.data(), 1, &scales[k], 0, &zero, 0, y.data(), n, bounds, RoundMode::kHalfEven);
        const auto t1 = std::chrono::steady_clock::now();
        t[k].push_back(std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(n) * 1e9);
      }
    }
    for (auto& v : t) std::sort(v.begin(), v.end());
    std::printf("%-7s scale 2^-4 (multiply): min %.4f p10 %.4f | scale 2^-4 + 1 ulp (divide): min %.4f p10 %.4f\n",
                isa_name(isa), t[0][0], t[0][t[0].size() / 10], t[1][0], t[1][t[1].size() / 10]);
  }
  return 0;
}
