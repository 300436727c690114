// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Calibration's counting on the GPU: the |x| of an activation tensor counted into
// activation_range's logarithmic bins (models/calibration.hpp) where the tensor lives, so a
// calibration over hundreds of images copies 64 KiB per tensor to the host instead of the
// tensor. Counts add, so the result does not depend on the order of the values or on how the
// images were split into batches.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/calibration.hpp>
#include <gpucmp/ops/elements.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpucmp {

namespace detail {

// counts: activation_range::bin_count bins, then the zeros (below the lowest bin), then the
// values refused (not finite, or past 2^64). max_bits: the largest |x| counted, as FP32 bits
// (non-negative floats order like their bits). Each block counts in shared memory first.
template <class T>
__global__ void count_magnitudes_kernel(const T* values, std::size_t n, unsigned long long* counts, unsigned int* max_bits) {
  constexpr int bins = activation_range::bin_count;
  __shared__ unsigned int local[bins];
  for (int i = threadIdx.x; i < bins; i += blockDim.x) local[i] = 0;
  __syncthreads();
  unsigned int zeros = 0, refused = 0;
  float most = 0;
  const float too_large = 18446744073709551616.0f;  // 2^64
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float a = fabsf(float(to_double(values[i])));
    if (!(a < too_large)) {
      ++refused;
      continue;
    }
    most = fmaxf(most, a);
    const int b = a > 0 ? activation_range::bin_of(double(a)) : -1;
    if (b < 0) {
      ++zeros;
    } else {
      atomicAdd(&local[b], 1u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < bins; i += blockDim.x) {
    if (local[i] != 0) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
  if (zeros != 0) atomicAdd(&counts[bins], static_cast<unsigned long long>(zeros));
  if (refused != 0) atomicAdd(&counts[bins + 1], static_cast<unsigned long long>(refused));
  atomicMax(max_bits, __float_as_uint(most));
}

}  // namespace detail

/// Counts of one activation tensor's |x| on the GPU, over as many calls as there are
/// calibration batches; range() hands them to the host as an activation_range.
class activation_counter {
 public:
  /// Zeroed counts on `stream`.
  explicit activation_counter(cudaStream_t stream)
      : m_counts(std::size_t(activation_range::bin_count) + 2, initial_fill::uninitialized()),
        m_max(1, initial_fill::uninitialized()) {
    reset(stream);
  }

  /// Starts over (asynchronous on `stream`).
  void reset(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_counts.data(), 0, m_counts.bytes(), stream));
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_max.data(), 0, m_max.bytes(), stream));
  }

  /// Counts `n` values at `values` (device memory: float, __half or __nv_bfloat16),
  /// asynchronously on `stream`.
  template <class T>
  void add(const T* values, std::size_t n, cudaStream_t stream) {
    if (n == 0) return;
    const unsigned blocks = unsigned(std::min<std::size_t>((n + 1023) / 1024, 1024));
    detail::count_magnitudes_kernel<T><<<blocks, 512, 0, stream>>>(values, n, m_counts.data(), m_max.data());
    GPUCMP_CUDA_CHECK_LAST("count_magnitudes_kernel");
  }

  /// The counts so far as a host activation_range (synchronizes `stream`). Throws
  /// invalid_argument naming `what` when a value was not finite or past 2^64 (the FP32 run
  /// is broken), as activation_range::add does.
  activation_range range(const std::string& what, cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<unsigned long long> counts = m_counts.to_host();
    const unsigned int bits = m_max.to_host().at(0);
    const std::uint64_t refused = counts.back();
    if (refused != 0) {
      throw invalid_argument("calibration of " + what + ": " + std::to_string(refused) +
                             " values are not finite or are past 2^64 (the FP32 run is broken)");
    }
    float largest = 0;
    std::memcpy(&largest, &bits, sizeof largest);
    const std::uint64_t zeros = counts[std::size_t(activation_range::bin_count)];
    std::vector<std::uint64_t> bins(counts.begin(), counts.begin() + activation_range::bin_count);
    activation_range r;
    r.add_counts(bins, zeros, double(largest), what);
    return r;
  }

 private:
  device_buffer<unsigned long long> m_counts;
  device_buffer<unsigned int> m_max;
};

}  // namespace gpucmp
