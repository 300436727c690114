// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Copies from global to shared memory that run while the thread goes on (cp.async, sm_80 on):
// a kernel keeps several tiles of loads in flight without holding them in registers. Before
// sm_80 each copy is an ordinary load and store, so a kernel written with them runs anywhere.
#pragma once

namespace gpucmp {

/// Starts copying 16 bytes from `global` to `shared` (both 16-byte aligned); with `fill`
/// false nothing is read and the 16 bytes are zeroed (a tile's tail past the data).
__device__ inline void copy_16_async(void* shared, const void* global, bool fill) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned to = unsigned(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(global), "r"(fill ? 16 : 0) : "memory");
#else
  *static_cast<uint4*>(shared) = fill ? *static_cast<const uint4*>(global) : uint4{0, 0, 0, 0};
#endif
}

/// Closes the copies this thread started since the last call into one group.
__device__ inline void commit_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// Waits until at most `Pending` of this thread's groups are still in flight (the older ones
/// have landed in shared memory, visible to this thread; other threads need a barrier).
template <int Pending>
__device__ inline void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

}  // namespace gpucmp
