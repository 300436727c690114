// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel launches that may overlap the kernel before them in their stream (programmatic
// dependent launch, sm_90 and later). A decode step is hundreds of short kernels; launched in
// order, each starts only after the one before has drained, and the gap and the ramp-up of
// every launch add up (the H100's Llama-3-8B decode step at batch 1: 0.81 of the bandwidth
// roofline, docs/results/h100-decoder.md). Launched overlapped, a kernel's blocks may start
// while the kernel before it still runs: it fetches what does not depend on that kernel (a
// GEMV its weights), then waits for it. Every kernel launched overlapped must call
// wait_for_prior_grids() (cuda/grid_dependency.cuh) before it reads or writes anything the
// kernels before it touch.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace gpucmp {

/// How a kernel's launch is ordered against the kernel before it in its stream.
enum class launch_order {
  serial,      ///< starts once the kernel before it has finished (CUDA's default)
  overlapped,  ///< may start while it runs (sm_90+; elsewhere serial); waits for it in wait_for_prior_grids()
};

/// Whether the current device honours launch_order::overlapped (compute capability 9.0 or later).
inline bool overlapped_launch_supported() {
  int device = 0, major = 0;
  GPUCMP_CUDA_CHECK(cudaGetDevice(&device));
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

/// Enqueues `kernel<<<grid, block, shared_bytes, stream>>>(args...)` in `order`. `what` names
/// the kernel in the error a failed launch throws.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
                   launch_order order, const char* what, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute overlap[1] = {};
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  if (order == launch_order::overlapped && overlapped_launch_supported()) {
    config.attrs = overlap;
    config.numAttrs = 1;
  }
  detail::check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), what, __FILE__, __LINE__);
}

}  // namespace gpucmp
