// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Row-wise softmax over FP32 logits (a classifier's probabilities), numerically stable: each
// row's maximum is subtracted before exp. One block per row; a host reference checks it.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

namespace detail {

__device__ inline float block_reduce(float v, bool take_max, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? scratch[lane] : (take_max ? -FLT_MAX : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, v, offset);
      v = take_max ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void softmax_kernel(const float* x, float* y, std::int64_t cols) {
  __shared__ float scratch[32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float local_max = -FLT_MAX;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) local_max = fmaxf(local_max, row[i]);
  const float row_max = block_reduce(local_max, true, scratch);
  float local_sum = 0;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) local_sum += expf(row[i] - row_max);
  const float sum = block_reduce(local_sum, false, scratch);
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[i] = expf(row[i] - row_max) / sum;
}

}  // namespace detail

/// Enqueues y = softmax(x) over each of `rows` rows of `cols` FP32 values (y may be x).
inline void softmax_forward(std::int64_t rows, std::int64_t cols, const float* x, float* y, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) throw invalid_argument("softmax_forward: rows and cols must be positive");
  if (rows > 2147483647) throw invalid_argument("softmax_forward: more than 2^31 - 1 rows");
  detail::softmax_kernel<><<<unsigned(rows), 256, 0, stream>>>(x, y, cols);
  GPUCMP_CUDA_CHECK_LAST("softmax_kernel");
}

/// Compares softmax output `y` with a double reference from `x` (host, row-major).
inline verification check_softmax(std::int64_t rows, std::int64_t cols, const std::vector<float>& x, const std::vector<float>& y) {
  verification v;
  v.method = "FP64 CPU reference of softmax, every output";
  for (std::int64_t r = 0; r < rows; ++r) {
    double most = -INFINITY, sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) most = std::fmax(most, double(x[std::size_t(r * cols + c)]));
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(double(x[std::size_t(r * cols + c)]) - most);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double ref = std::exp(double(x[std::size_t(r * cols + c)]) - most) / sum;
      // expf's few ulp, the FP32 sum's rounding and the division: relative, plus an absolute
      // floor for tiny probabilities.
      const double bound = 1e-5 * ref + 1e-7 / double(cols) + 8 * 0x1p-24 * std::sqrt(double(cols)) * ref;
      v.add(double(y[std::size_t(r * cols + c)]), ref, bound, "row " + std::to_string(r) + ", column " + std::to_string(c));
    }
  }
  return v;
}

}  // namespace gpucmp
