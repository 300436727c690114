// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Page-locked host memory (cudaMallocHost), so host<->device copies run at the bus's speed
// and asynchronously. Owns the allocation; move-only; the destructor never throws.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace gpucmp {

/// `count` elements of T in pinned host memory.
template <class T>
class pinned_buffer {
 public:
  pinned_buffer() noexcept = default;
  /// Allocates `count` elements (contents undefined); throws cuda_error when it cannot.
  explicit pinned_buffer(std::size_t count) : m_count(count) {
    if (count == 0) return;
    void* p = nullptr;
    GPUCMP_CUDA_CHECK(cudaMallocHost(&p, count * sizeof(T)));
    m_data = static_cast<T*>(p);
  }
  ~pinned_buffer() {
    if (m_data != nullptr) cudaFreeHost(m_data);  // errors ignored: destructors never throw
  }
  pinned_buffer(pinned_buffer&& other) noexcept
      : m_data(std::exchange(other.m_data, nullptr)), m_count(std::exchange(other.m_count, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& other) noexcept {
    if (this != &other) {
      if (m_data != nullptr) cudaFreeHost(m_data);
      m_data = std::exchange(other.m_data, nullptr);
      m_count = std::exchange(other.m_count, 0);
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;

  T* data() noexcept { return m_data; }                          ///< host pointer
  const T* data() const noexcept { return m_data; }              ///< host pointer
  std::size_t size() const noexcept { return m_count; }          ///< elements
  std::size_t bytes() const noexcept { return m_count * sizeof(T); }  ///< bytes

 private:
  T* m_data = nullptr;
  std::size_t m_count = 0;
};

}  // namespace gpucmp
