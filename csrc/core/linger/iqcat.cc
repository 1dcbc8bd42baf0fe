#include "core/linger/iqcat.h"

#include <algorithm>
#include <cstring>

namespace ortquant::linger {

void iqcat(const std::vector<CatPart>& parts, int8_t* out, int64_t begin, int64_t end) {
  int64_t row = 0;
  for (const CatPart& p : parts) row += p.inner;
  if (row == 0) return;
  int64_t pos = begin;
  while (pos < end) {
    const int64_t o = pos / row;
    int64_t col = pos - o * row;
    // Find the part holding column col.
    size_t k = 0;
    while (col >= parts[k].inner) col -= parts[k++].inner;
    const CatPart& p = parts[k];
    const int64_t len = std::min(p.inner - col, end - pos);
    const int8_t* src = p.data + o * p.inner + col;
    if (p.map->identity()) {
      std::memcpy(out + pos, src, static_cast<size_t>(len));
    } else {
      p.map->run(src, out + pos, len);
    }
    pos += len;
  }
}

}  // namespace ortquant::linger
