// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA event with timing enabled: the only clock gpucmp uses for GPU time.
#pragma once

#include <gpucmp/error.hpp>

#include <cuda_runtime_api.h>

#include <utility>

namespace gpucmp {

/// Owns one timing-capable CUDA event on the current device; move-only.
class event {
 public:
  /// Creates an event with timing enabled (blocking-sync off: synchronize() spins for low latency).
  event() { GPUCMP_CUDA_CHECK(cudaEventCreateWithFlags(&m_event, cudaEventDefault)); }
  ~event() {
    if (m_event != nullptr) cudaEventDestroy(m_event);  // errors ignored: destructors never throw
  }
  event(event&& other) noexcept : m_event(std::exchange(other.m_event, nullptr)) {}
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      if (m_event != nullptr) cudaEventDestroy(m_event);
      m_event = std::exchange(other.m_event, nullptr);
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// The raw handle; stays owned by this object.
  cudaEvent_t get() const noexcept { return m_event; }
  /// Records the event on `stream`.
  void record(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaEventRecord(m_event, stream)); }
  /// Blocks the host until the event has completed.
  void synchronize() const { GPUCMP_CUDA_CHECK(cudaEventSynchronize(m_event)); }

 private:
  cudaEvent_t m_event = nullptr;
};

/// Seconds between two completed events (resolution about 0.5 us).
inline double elapsed_s(const event& start, const event& stop) {
  float ms = 0.0f;
  GPUCMP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace gpucmp
