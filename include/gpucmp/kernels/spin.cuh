// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A kernel that runs for a known time by spinning on the GPU's global nanosecond timer:
// the reference for checking how close a timing method gets to a kernel's real duration.
// CUDA translation units only (device code).
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace gpucmp::kernels {

__device__ inline std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// One thread spins until `duration_ns` have passed on %globaltimer since it started.
__global__ void spin_for(std::uint64_t duration_ns) {
  const std::uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < duration_ns) {
  }
}

/// Launches spin_for with one thread on `stream`; throws cuda_error if the launch fails.
inline void launch_spin(cudaStream_t stream, double seconds) {
  spin_for<<<1, 1, 0, stream>>>(static_cast<std::uint64_t>(seconds * 1e9 + 0.5));
  GPUCMP_CUDA_CHECK_LAST("spin_for<<<1, 1>>>");
}

}  // namespace gpucmp::kernels
