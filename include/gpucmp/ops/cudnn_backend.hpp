// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A thin RAII layer over cuDNN's backend (graph) API: one owned descriptor, typed attribute
// setters and getters that throw gpucmp errors naming the attribute. The backend API reaches
// every engine and knob configuration cuDNN has; the legacy cudnnConvolution* calls reach
// one configuration per algorithm enum.
#pragma once

#include <gpucmp/error.hpp>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp::detail {

/// One owned cudnnBackendDescriptor_t; move-only; the destructor never throws.
class backend_descriptor {
 public:
  backend_descriptor() noexcept = default;
  /// Creates a descriptor of `type`.
  explicit backend_descriptor(cudnnBackendDescriptorType_t type) {
    GPUCMP_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &m_desc));
  }
  ~backend_descriptor() {
    if (m_desc != nullptr) cudnnBackendDestroyDescriptor(m_desc);  // status ignored: destructors never throw
  }
  backend_descriptor(backend_descriptor&& other) noexcept : m_desc(std::exchange(other.m_desc, nullptr)) {}
  backend_descriptor& operator=(backend_descriptor&& other) noexcept {
    if (this != &other) {
      if (m_desc != nullptr) cudnnBackendDestroyDescriptor(m_desc);
      m_desc = std::exchange(other.m_desc, nullptr);
    }
    return *this;
  }
  backend_descriptor(const backend_descriptor&) = delete;
  backend_descriptor& operator=(const backend_descriptor&) = delete;

  /// The raw descriptor.
  cudnnBackendDescriptor_t get() const noexcept { return m_desc; }

  /// Sets attribute `name` to `count` values of `type`.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* values) {
    check_cudnn(cudnnBackendSetAttribute(m_desc, name, type, count, values),
                "cudnnBackendSetAttribute(attribute " + std::to_string(int(name)) + ")");
  }
  /// Sets a descriptor-valued attribute.
  void set(cudnnBackendAttributeName_t name, const backend_descriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  /// Sets an array of int64 values.
  void set(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values) {
    set(name, CUDNN_TYPE_INT64, std::int64_t(values.size()), values.data());
  }
  /// Finalizes the descriptor; throws (unsupported for "not supported") when cuDNN refuses it.
  void finalize(const char* what) { check_cudnn(cudnnBackendFinalize(m_desc), std::string("cudnnBackendFinalize(") + what + ")"); }
  /// Finalizes; returns false instead of throwing (engine configurations that do not apply).
  bool try_finalize() noexcept { return cudnnBackendFinalize(m_desc) == CUDNN_STATUS_SUCCESS; }

  /// Reads one int64 attribute.
  std::int64_t get_int64(cudnnBackendAttributeName_t name) const {
    std::int64_t value = 0, count = 0;
    check_cudnn(cudnnBackendGetAttribute(m_desc, name, CUDNN_TYPE_INT64, 1, &count, &value),
                "cudnnBackendGetAttribute(attribute " + std::to_string(int(name)) + ")");
    return value;
  }

 private:
  cudnnBackendDescriptor_t m_desc = nullptr;
};

/// A finalized tensor descriptor: dimensions and strides in NCHW order of the dimensions,
/// `uid` names it in variant packs.
inline backend_descriptor make_backend_tensor(std::int64_t uid, cudnnDataType_t type, const std::vector<std::int64_t>& dims,
                                              const std::vector<std::int64_t>& strides) {
  backend_descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  t.set(CUDNN_ATTR_TENSOR_STRIDES, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  const std::int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  t.finalize("tensor");
  return t;
}

}  // namespace gpucmp::detail
