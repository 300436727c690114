// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Typed device memory with RAII. A new buffer holds deterministic random data unless asked
// otherwise, because zeros hide unwritten outputs and can run faster than real data.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpucmp {

namespace detail {
/// Seeds handed to buffers that were not given one: deterministic in allocation order.
inline std::uint64_t next_default_seed() noexcept {
  static std::atomic<std::uint64_t> counter{0x67707563'6d700000ull};
  return counter.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

/// How a new buffer's contents are initialised.
struct initial_fill {
  enum class kind {
    random,         ///< deterministic random values (the default)
    poison,         ///< every byte 0xFF: NaN for floating types, -1 for signed integers
    uninitialized,  ///< whatever the allocator returns; for outputs that are written before they are read
  };
  kind what = kind::random;  ///< the initialisation
  std::uint64_t seed = 0;    ///< seed for kind::random

  /// Random values from stream `seed`.
  static initial_fill random(std::uint64_t seed) noexcept { return {kind::random, seed}; }
  /// Random values from the next default seed (deterministic in allocation order).
  static initial_fill random() noexcept { return {kind::random, detail::next_default_seed()}; }
  /// All bytes 0xFF, to catch outputs that are never written.
  static initial_fill poison() noexcept { return {kind::poison, 0}; }
  /// Leave the memory as allocated.
  static initial_fill uninitialized() noexcept { return {kind::uninitialized, 0}; }
};

/// `count` elements of T in device memory on the current device; owns the allocation; move-only.
/// Fills and copies are synchronous (they run outside any timed region).
template <class T>
class device_buffer {
 public:
  /// An empty buffer.
  device_buffer() noexcept = default;

  /// Allocates `count` elements and fills them as `fill` says; throws out_of_memory when it does not fit.
  explicit device_buffer(std::size_t count, initial_fill fill = initial_fill::random()) : m_count(count) {
    allocate();
    switch (fill.what) {
      case initial_fill::kind::random:
        fill_random(fill.seed);
        break;
      case initial_fill::kind::poison:
        poison();
        break;
      case initial_fill::kind::uninitialized:
        break;
    }
  }

  ~device_buffer() {
    if (m_data != nullptr) cudaFree(m_data);  // errors ignored: destructors never throw
  }
  device_buffer(device_buffer&& other) noexcept
      : m_data(std::exchange(other.m_data, nullptr)), m_count(std::exchange(other.m_count, 0)) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      if (m_data != nullptr) cudaFree(m_data);
      m_data = std::exchange(other.m_data, nullptr);
      m_count = std::exchange(other.m_count, 0);
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  /// Device pointer to the first element.
  T* data() noexcept { return m_data; }
  /// Device pointer to the first element.
  const T* data() const noexcept { return m_data; }
  /// Number of elements.
  std::size_t size() const noexcept { return m_count; }
  /// Size in bytes.
  std::size_t bytes() const noexcept { return m_count * sizeof(T); }
  /// True when the buffer holds no elements.
  bool empty() const noexcept { return m_count == 0; }

  /// Overwrites every element with values of random stream `seed` within `range`.
  void fill_random(std::uint64_t seed, value_range<T> range = default_range<T>()) {
    static_assert(is_random_fillable_v<T>, "fill_random: no random_value<T> for this element type");
    // Generate in chunks on all host cores, then copy each chunk; value i depends only on (seed, i).
    constexpr std::size_t chunk_elements = (std::size_t{32} << 20) / sizeof(T);
    std::vector<T> host(std::min(m_count, chunk_elements));
    const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    for (std::size_t first = 0; first < m_count; first += chunk_elements) {
      const std::size_t n = std::min(chunk_elements, m_count - first);
      const std::size_t per_thread = (n + threads - 1) / threads;
      std::vector<std::thread> workers;
      for (unsigned t = 1; t < threads && t * per_thread < n; ++t) {
        const std::size_t begin = t * per_thread, len = std::min(per_thread, n - begin);
        workers.emplace_back([&, begin, len] { generate_random(host.data() + begin, len, seed, first + begin, range); });
      }
      generate_random(host.data(), std::min(per_thread, n), seed, first, range);
      for (auto& w : workers) w.join();
      GPUCMP_CUDA_CHECK(cudaMemcpy(m_data + first, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    }
    if (m_count != 0) wait_for_host_copies();
  }

  /// Sets every byte to 0xFF, so outputs that a kernel fails to write stand out (NaN for floats).
  void poison() {
    if (m_count != 0) {
      GPUCMP_CUDA_CHECK(cudaMemset(m_data, 0xFF, bytes()));
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

  /// Copies host values in; `values.size()` must equal size().
  void copy_from_host(const std::vector<T>& values) {
    if (values.size() != m_count) {
      throw invalid_argument("device_buffer::copy_from_host: " + std::to_string(values.size()) +
                             " values for a buffer of " + std::to_string(m_count));
    }
    if (m_count != 0) {
      GPUCMP_CUDA_CHECK(cudaMemcpy(m_data, values.data(), bytes(), cudaMemcpyHostToDevice));
      wait_for_host_copies();
    }
  }

  /// Copies the whole buffer to the host (waits for work on all streams of the device first).
  std::vector<T> to_host() const {
    std::vector<T> values(m_count);
    if (m_count != 0) {
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
      GPUCMP_CUDA_CHECK(cudaMemcpy(values.data(), m_data, bytes(), cudaMemcpyDeviceToHost));
    }
    return values;
  }

 private:
  // cudaMemcpy from pageable host memory may return once the data is staged, before the DMA
  // has landed, and a kernel on a non-blocking stream is not ordered after it: a kernel reading
  // the buffer right away can see part of the old contents. Wait until it has landed. (The
  // likely cause of FP16 ResNet-50 logits that were wrong in most processes while every layer's
  // check agreed with its inputs: FP16 weights went through a staging buffer and a conversion
  // kernel; FP32 weights, copied directly, were always right. docs/results/h200-models.md.)
  static void wait_for_host_copies() { GPUCMP_CUDA_CHECK(cudaDeviceSynchronize()); }

  void allocate() {
    if (m_count == 0) return;
    if (m_count > static_cast<std::size_t>(-1) / sizeof(T)) {
      throw invalid_argument("device_buffer: " + std::to_string(m_count) + " elements overflow size_t bytes");
    }
    void* p = nullptr;
    const cudaError_t code = cudaMalloc(&p, bytes());
    if (code == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // allocation failures are not sticky: clear and report what was needed
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
      throw out_of_memory(bytes(), free_bytes, total_bytes,
                          "device_buffer of " + std::to_string(m_count) + " elements");
    }
    GPUCMP_CUDA_CHECK(code);
    m_data = static_cast<T*>(p);
  }

  T* m_data = nullptr;
  std::size_t m_count = 0;
};

}  // namespace gpucmp
