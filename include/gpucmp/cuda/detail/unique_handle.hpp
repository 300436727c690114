// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One move-only owner for every CUDA runtime handle (stream, event, graph, graph exec), so
// each RAII type states only how its handle is made.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

namespace gpucmp::detail {

/// Owns a handle released with `Destroy`; errors from Destroy are ignored (destructors never throw).
template <class Handle, auto Destroy>
class unique_handle {
 public:
  unique_handle() noexcept = default;
  explicit unique_handle(Handle handle) noexcept : m_handle(handle) {}
  ~unique_handle() { reset(); }
  unique_handle(unique_handle&& other) noexcept : m_handle(std::exchange(other.m_handle, nullptr)) {}
  unique_handle& operator=(unique_handle&& other) noexcept {
    if (this != &other) {
      reset();
      m_handle = std::exchange(other.m_handle, nullptr);
    }
    return *this;
  }
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;

  /// The raw handle (nullptr when empty).
  Handle get() const noexcept { return m_handle; }
  /// Releases the handle now.
  void reset() noexcept {
    if (m_handle != nullptr) Destroy(m_handle);
    m_handle = nullptr;
  }

 private:
  Handle m_handle = nullptr;
};

}  // namespace gpucmp::detail
