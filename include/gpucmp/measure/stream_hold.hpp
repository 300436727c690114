// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Holds a stream so that launches queue up behind it and then run back to back, keeping
// host launch latency out of the timed window. The stream waits on a host-written value
// (cuStreamWaitValue32 on mapped pinned memory), so no device code is needed. A watchdog
// thread releases the stream after a timeout: code that synchronizes on its own stream
// while it is held would otherwise deadlock, and instead fails with hold_timeout. The owner
// names each step it takes while holding (note()), so a timeout can say where the host was
// blocked.
#pragma once

#include <gpucmp/cuda/detail/driver_entry_point.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gpucmp {

/// Holds streams of the current device behind a host-written flag; owns the flag and a
/// watchdog thread. One hold at a time. Not copyable or movable (the watchdog points at it).
class stream_hold {
 public:
  /// Allocates the flag on the current device's context; resolves cuStreamWaitValue32.
  /// Throws unsupported when the driver offers no stream wait.
  stream_hold() {
    std::string why;
    m_wait = reinterpret_cast<wait_value_fn>(detail::driver_entry_point("cuStreamWaitValue32", 12000, why));
    if (m_wait == nullptr) throw unsupported("stream hold: " + why);
    void* host = nullptr;
    GPUCMP_CUDA_CHECK(cudaHostAlloc(&host, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    m_flag = static_cast<volatile std::uint32_t*>(host);
    *m_flag = 0;
    void* device = nullptr;
    const cudaError_t code = cudaHostGetDevicePointer(&device, host, 0);
    if (code != cudaSuccess) {
      cudaFreeHost(host);
      detail::check_cuda(code, "cudaHostGetDevicePointer(flag)", __FILE__, __LINE__);
    }
    m_flag_device = reinterpret_cast<CUdeviceptr>(device);
    m_watchdog = std::thread([this] { watch(); });
  }

  ~stream_hold() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_shutdown = true;
      m_armed = false;
    }
    m_wake.notify_all();
    if (m_watchdog.joinable()) m_watchdog.join();
    write_flag(m_generation);  // never leave a stream waiting on freed memory
    cudaFreeHost(const_cast<std::uint32_t*>(m_flag));  // errors ignored: destructors never throw
  }

  stream_hold(const stream_hold&) = delete;
  stream_hold& operator=(const stream_hold&) = delete;

  /// Makes `stream` wait until release(); the watchdog releases it after `timeout_s`.
  /// Throws unsupported when the driver refuses the wait (the stream is then not held).
  void hold(cudaStream_t stream, double timeout_s) {
    const std::uint32_t generation = m_generation + 1;
    const CUresult result = m_wait(reinterpret_cast<CUstream>(stream), m_flag_device, generation, CU_STREAM_WAIT_VALUE_GEQ);
    if (result != CUDA_SUCCESS) throw unsupported("stream hold: cuStreamWaitValue32 failed with " + detail::driver_error_name(result));
    m_generation = generation;
    note("", no_index);
    std::lock_guard<std::mutex> lock(m_mutex);
    m_fired = false;
    m_fired_step.clear();
    m_armed = true;
    m_deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
    m_wake.notify_all();
  }

  /// Releases the held stream. Returns false when the watchdog had already released it
  /// because the timeout passed (the caller reports hold_timeout).
  bool release() noexcept {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_armed = false;
    write_flag(m_generation);
    return !m_fired;
  }

  /// No launch index for note().
  static constexpr std::size_t no_index = static_cast<std::size_t>(-1);

  /// Names the step the owner thread takes next while the stream is held: `step` a string
  /// literal, `index` which launch (or no_index). Cheap enough for every launch of a batch.
  void note(const char* step, std::size_t index = no_index) noexcept {
    m_step_index.store(index, std::memory_order_relaxed);
    m_step.store(step, std::memory_order_release);
  }

  /// The step noted last before the watchdog released the stream ("launch 3 of the measured
  /// callable", "the L2 flush"); empty when it did not fire or nothing was noted.
  std::string blocked_in() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_fired_step;
  }

 private:
  using wait_value_fn = CUresult(CUDAAPI*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

  void write_flag(std::uint32_t value) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *m_flag = value;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  void watch() {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (!m_shutdown) {
      if (!m_armed) {
        m_wake.wait(lock);
      } else if (m_wake.wait_until(lock, m_deadline) == std::cv_status::timeout && m_armed &&
                 std::chrono::steady_clock::now() >= m_deadline) {
        write_flag(m_generation);
        m_fired = true;
        m_armed = false;
        m_fired_step = describe_step();
      }
    }
  }

  // The noted step, for the watchdog's record; a launch reads "launch N of the measured callable".
  std::string describe_step() const {
    const char* step = m_step.load(std::memory_order_acquire);
    const std::size_t index = m_step_index.load(std::memory_order_relaxed);
    if (step == nullptr || *step == '\0') return {};
    try {
      return index == no_index ? std::string(step)
                               : std::string(step) + " " + std::to_string(index) + " of the measured callable";
    } catch (...) {  // the watchdog thread must not end on an allocation failure
      return {};
    }
  }

  wait_value_fn m_wait = nullptr;
  volatile std::uint32_t* m_flag = nullptr;
  CUdeviceptr m_flag_device = 0;
  std::uint32_t m_generation = 0;  // written by the owner thread only; read by the watchdog under m_mutex

  std::atomic<const char*> m_step{nullptr};  // written by the owner thread, read by the watchdog
  std::atomic<std::size_t> m_step_index{no_index};

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::chrono::steady_clock::time_point m_deadline{};
  bool m_armed = false;
  bool m_fired = false;
  std::string m_fired_step;  // describe_step() when the watchdog fired
  bool m_shutdown = false;
  std::thread m_watchdog;
};

}  // namespace gpucmp
