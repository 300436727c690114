// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A block-wide FP32 sum (warp shuffles, then one warp over the warps' sums), for the
// row-wise kernels: every thread of the block gets the total.
#pragma once

namespace gpucmp::detail {

/// The sum of `v` over the block's threads, returned to every thread. Every thread must call
/// it (it synchronises the block twice); blockDim.x is a multiple of 32, at most 1024.
__device__ inline float block_sum(float v) {
  __shared__ float warp_sums[32];
  __shared__ float total;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < int(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

}  // namespace gpucmp::detail
