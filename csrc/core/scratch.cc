#include "core/scratch.h"

#include <memory>
#include <new>

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
    const size_t grown = bytes + bytes / 4;  // some headroom for slowly growing shapes
    b.ptr.reset();
    b.ptr.reset(::operator new(grown, std::align_val_t(64)));
    b.size = grown;
  }
  return b.ptr.get();
}

}  // namespace ortquant
