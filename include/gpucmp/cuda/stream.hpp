// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA stream. Measurements run on a non-blocking stream of their own, never on the
// legacy default stream, so unrelated work on stream 0 cannot serialise with them.
#pragma once

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

namespace gpucmp {

/// Owns one CUDA stream created on the current device; move-only.
class stream {
 public:
  /// Creates a non-blocking stream on the current device.
  stream() {
    cudaStream_t s = nullptr;
    GPUCMP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    m_stream = handle(s);
  }

  /// The raw handle; stays owned by this object.
  cudaStream_t get() const noexcept { return m_stream.get(); }
  /// Blocks the host until all work queued on the stream has finished.
  void synchronize() const { GPUCMP_CUDA_CHECK(cudaStreamSynchronize(get())); }

 private:
  using handle = detail::unique_handle<cudaStream_t, cudaStreamDestroy>;
  handle m_stream;
};

}  // namespace gpucmp
