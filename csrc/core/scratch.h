// Per-thread reusable scratch buffers for per-call temporaries (packed activations, phase planes, output grids):
// allocated once per thread and size, grown on demand, never zeroed, so a kernel call pays no allocation, page
// faults or clearing for its temporaries. A buffer is owned by the calling thread for the duration of one call
// (the pool tasks it spawns may use it); each use site has its own slot so nested uses do not collide.
#pragma once
#include <cstddef>

namespace ortquant {

enum class ScratchSlot : int {
  kGemmRowsA = 0,
  kGemmPanels,
  kConvPhases,
  kConvGrid,
  kConvRows,
  kConvTaps,
  kDepthwisePhases,
  kDepthwiseAcc,
  kConvTransposeSums,
  kConvTransposeAcc,
  kCount
};

// At least `bytes` bytes, 64-byte aligned, valid until the next call with the same slot on this thread.
void* thread_scratch(ScratchSlot slot, size_t bytes);

template <class T>
T* thread_scratch_as(ScratchSlot slot, size_t count) {
  return static_cast<T*>(thread_scratch(slot, count * sizeof(T)));
}

}  // namespace ortquant
