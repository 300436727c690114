// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA stream. Measurements run on a non-blocking stream of their own, never on the
// legacy default stream, so unrelated work on stream 0 cannot serialise with them.
#pragma once

#include <gpucmp/error.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace gpucmp {

/// Owns one CUDA stream created on the current device; move-only.
class stream {
 public:
  /// Creates a non-blocking stream on the current device.
  stream() { GPUCMP_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking)); }
  ~stream() {
    if (m_stream != nullptr) cudaStreamDestroy(m_stream);  // errors ignored: destructors never throw
  }
  stream(stream&& other) noexcept : m_stream(std::exchange(other.m_stream, nullptr)) {}
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      if (m_stream != nullptr) cudaStreamDestroy(m_stream);
      m_stream = std::exchange(other.m_stream, nullptr);
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// The raw handle; stays owned by this object.
  cudaStream_t get() const noexcept { return m_stream; }
  /// Blocks the host until all work queued on the stream has finished.
  void synchronize() const { GPUCMP_CUDA_CHECK(cudaStreamSynchronize(m_stream)); }

 private:
  cudaStream_t m_stream = nullptr;
};

}  // namespace gpucmp
