// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA event with timing enabled: the clock of gpucmp's event modes.
#pragma once

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

namespace gpucmp {

/// Owns one timing-capable CUDA event on the current device; move-only.
class event {
 public:
  /// Creates an event with timing enabled (blocking-sync off: synchronize() spins for low latency).
  event() {
    cudaEvent_t e = nullptr;
    GPUCMP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));
    m_event = handle(e);
  }

  /// The raw handle; stays owned by this object.
  cudaEvent_t get() const noexcept { return m_event.get(); }
  /// Records the event on `stream`.
  void record(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaEventRecord(get(), stream)); }
  /// Blocks the host until the event has completed.
  void synchronize() const { GPUCMP_CUDA_CHECK(cudaEventSynchronize(get())); }

 private:
  using handle = detail::unique_handle<cudaEvent_t, cudaEventDestroy>;
  handle m_event;
};

/// Seconds between two completed events (resolution about 0.5 us).
inline double elapsed_s(const event& start, const event& stop) {
  float ms = 0.0f;
  GPUCMP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace gpucmp
