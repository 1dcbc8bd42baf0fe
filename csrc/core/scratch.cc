#include "core/scratch.h"

#include <memory>
#include <string>
#include <new>

#include "core/checked.h"

namespace ortquant {
namespace {

struct Buffer {
  struct Free {
    void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
  };
  std::unique_ptr<void, Free> ptr;
  size_t size = 0;
};

thread_local Buffer t_buffers[static_cast<int>(ScratchSlot::kCount)];

}  // namespace

void* thread_scratch(ScratchSlot slot, size_t bytes) {
  Buffer& b = t_buffers[static_cast<int>(slot)];
  if (bytes == 0) bytes = 64;
  if (b.size < bytes) {
    static const char* const names[] = {"GEMM row tiles",        "GEMM panels",
                                        "convolution phase planes", "convolution output grid",
                                        "convolution row pointers", "convolution tap offsets",
                                        "depthwise phase planes",
                                        "depthwise accumulators",  "transposed convolution sums",
                                        "transposed convolution accumulators"};
    static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(ScratchSlot::kCount));
    const std::string what = std::string("scratch buffer (") + names[static_cast<int>(slot)] + ")";
    // Checked against the per-tensor byte limit (sizes come from models; a wrapped size_t is caught too).
    if (bytes > static_cast<size_t>(kMaxTensorBytes))
      throw_error(what, " would take ", bytes, " bytes, more than the limit of ", kMaxTensorBytes,
                  " bytes (docs/ops.md, Limits)");
    checked_bytes(static_cast<int64_t>(bytes), 1, what.c_str());
    const size_t grown = bytes + bytes / 4;  // some headroom for slowly growing shapes
    b.ptr.reset();
    b.size = 0;
    try {
      b.ptr.reset(::operator new(grown, std::align_val_t(64)));
    } catch (const std::bad_alloc&) {
      throw_error("out of memory allocating ", grown, " bytes for the ", what);
    }
    b.size = grown;
  }
  return b.ptr.get();
}

}  // namespace ortquant
