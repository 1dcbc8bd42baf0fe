// linger iqCat (thinker domain), spec: linger.md section 1 "iqCat": every input is requantized on its own,
// q_i' = saturate8(floor(q_i * so/s_i + 1/2)), then the inputs are concatenated along `dim`.
#pragma once
#include <cstdint>
#include <vector>

#include "core/linger/elementwise.h"

namespace ortquant::linger {

struct CatPart {
  const int8_t* data = nullptr;
  int64_t inner = 0;  // elements of this input per outer index (its size along dim times the trailing size)
  const UnaryI8* map = nullptr;
};

// Writes the flat output range [begin, end) of outer x sum(inner) elements.
void iqcat(const std::vector<CatPart>& parts, int8_t* out, int64_t begin, int64_t end);

}  // namespace ortquant::linger
