// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Flushes the L2 cache before a cold sample by writing a buffer larger than L2 with
// cudaMemsetAsync (no device code needed). The buffer is twice the L2 size: Hopper's and
// Ampere's L2 is split into two partitions whose replacement is not strictly LRU, and a
// single L2-sized pass can leave some of the working set resident.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gpucmp {

/// Owns the flush buffer on the current device.
class l2_flusher {
 public:
  /// How many times the L2 size the flush writes.
  static constexpr std::size_t l2_multiple = 2;

  /// Allocates l2_multiple × `l2_bytes` (at least 1 MiB, for devices that report 0).
  explicit l2_flusher(std::size_t l2_bytes)
      : m_buffer(l2_multiple * (l2_bytes > 0 ? l2_bytes : (std::size_t{1} << 20)), initial_fill::uninitialized()) {}

  /// Queues the flush on `stream`; the value changes every call so no write is redundant.
  void enqueue(cudaStream_t stream) {
    m_value = (m_value + 1) & 0xFF;
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_buffer.data(), m_value, m_buffer.bytes(), stream));
  }

  /// Bytes written per flush.
  std::size_t bytes() const noexcept { return m_buffer.bytes(); }

 private:
  device_buffer<unsigned char> m_buffer;
  int m_value = 0;
};

}  // namespace gpucmp
