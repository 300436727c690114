// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Work on several GPUs' streams, forked from one stream and joined back to it, so the engine
// times it on that one stream like any call (in hot mode, or captured into a CUDA graph):
//   begin(origin)       an event on origin's device (inside a capture: the current device's);
//                       every branch's stream then waits on it
//   wait(b, stream)     branch b's stream waits for the fork
//   done(b, stream)     branch b's work is queued: an event on its device
//   join(origin)        origin waits for every branch marked done since begin()
// The caller sets the current device to each branch's before enqueueing its work. RAII
// events; the destructor never throws. Core CUDA only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace gpucmp {

/// A fork to and join from streams on `branch_devices` (file comment).
class stream_fork {
 public:
  /// One branch per device listed (a device may appear twice).
  explicit stream_fork(std::vector<int> branch_devices) : m_devices(std::move(branch_devices)), m_used(m_devices.size(), false) {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    try {
      for (int d : m_devices) {
        GPUCMP_CUDA_CHECK(cudaSetDevice(d));
        cudaEvent_t e = nullptr;
        GPUCMP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        m_done.push_back(e);
      }
    } catch (...) {
      release();
      cudaSetDevice(previous);
      throw;
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
  }
  stream_fork(const stream_fork&) = delete;
  stream_fork& operator=(const stream_fork&) = delete;
  ~stream_fork() { release(); }

  /// Records the fork on `origin` (any device's stream; its event is made on that device).
  void begin(cudaStream_t origin) const {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    const int device = origin_device(origin, previous);
    GPUCMP_CUDA_CHECK(cudaSetDevice(device));
    if (m_start == nullptr || m_start_device != device) {
      if (m_start != nullptr) GPUCMP_CUDA_CHECK(cudaEventDestroy(m_start));
      m_start = nullptr;
      GPUCMP_CUDA_CHECK(cudaEventCreateWithFlags(&m_start, cudaEventDisableTiming));
      m_start_device = device;
    }
    GPUCMP_CUDA_CHECK(cudaEventRecord(m_start, origin));
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_used.assign(m_devices.size(), false);
  }
  /// Branch `branch`'s `stream` waits for the fork.
  void wait(std::size_t branch, cudaStream_t stream) const {
    check(branch);
    GPUCMP_CUDA_CHECK(cudaStreamWaitEvent(stream, m_start, 0));
  }
  /// Marks branch `branch`'s work on `stream` (on its device, the current one) as queued.
  void done(std::size_t branch, cudaStream_t stream) const {
    check(branch);
    GPUCMP_CUDA_CHECK(cudaEventRecord(m_done[branch], stream));
    m_used[branch] = true;
  }
  /// `origin` waits for every branch marked done since begin().
  void join(cudaStream_t origin) const {
    for (std::size_t b = 0; b < m_done.size(); ++b) {
      if (m_used[b]) GPUCMP_CUDA_CHECK(cudaStreamWaitEvent(origin, m_done[b], 0));
    }
  }

 private:
  // origin's device. cudaStreamGetDevice is refused while the stream captures (CUDA 13, seen
  // on the H200) and the refusal ends the capture, so a capturing origin is taken to be on
  // the current device: the engine's, which made the stream it captures on.
  int origin_device(cudaStream_t origin, int current) const {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    GPUCMP_CUDA_CHECK(cudaStreamIsCapturing(origin, &capture));
    if (capture != cudaStreamCaptureStatusNone) return current;
    int device = 0;
    GPUCMP_CUDA_CHECK(cudaStreamGetDevice(origin, &device));
    return device;
  }
  void check(std::size_t branch) const {
    if (branch >= m_done.size()) throw invalid_argument("stream_fork: no branch " + std::to_string(branch));
    if (m_start == nullptr) throw invalid_argument("stream_fork: begin() first");
  }
  void release() noexcept {
    for (cudaEvent_t e : m_done) cudaEventDestroy(e);
    m_done.clear();
    if (m_start != nullptr) cudaEventDestroy(m_start);
    m_start = nullptr;
    cudaGetLastError();
  }

  std::vector<int> m_devices;
  std::vector<cudaEvent_t> m_done;       // one per branch, on its device
  mutable std::vector<bool> m_used;      // branches marked done since begin()
  mutable cudaEvent_t m_start = nullptr;  // the fork, on the device of the origin last given
  mutable int m_start_device = -1;
};

}  // namespace gpucmp
