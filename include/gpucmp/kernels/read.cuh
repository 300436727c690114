// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A read-bound kernel: sums a buffer with 16-byte loads and writes one value per block, so
// its time is the time to stream the buffer through the memory hierarchy. Used to show
// cold (L2 flushed) against hot (L2 resident) timing. CUDA translation units only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>

namespace gpucmp::kernels {

/// Sums `count` float4 values; block b writes its partial sum to partial[b].
__global__ void read_sum(const float4* __restrict__ in, std::size_t count, float* __restrict__ partial) {
  float acc = 0.0f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 v = in[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  __shared__ float warp_sums[32];
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warp_sums[w];
    partial[blockIdx.x] = total;
  }
}

/// Threads per block of read_sum.
inline constexpr int read_sum_block = 256;

/// Launches read_sum over `count` float4 with `blocks` blocks (partial must hold `blocks` floats).
inline void launch_read_sum(cudaStream_t stream, const float4* in, std::size_t count, float* partial, int blocks) {
  read_sum<<<blocks, read_sum_block, 0, stream>>>(in, count, partial);
  GPUCMP_CUDA_CHECK_LAST("read_sum<<<blocks, 256>>>");
}

}  // namespace gpucmp::kernels
