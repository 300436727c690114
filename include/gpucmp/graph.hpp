// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA graphs and stream capture. Graph replay launches a whole batch with one call,
// which removes most of the per-launch gap from batched measurements.
#pragma once

#include <gpucmp/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace gpucmp {

/// Owns an instantiated, launchable graph; move-only.
class graph_exec {
 public:
  /// An empty handle.
  graph_exec() noexcept = default;
  /// Instantiates `graph` (which stays owned by the caller).
  explicit graph_exec(cudaGraph_t graph) { GPUCMP_CUDA_CHECK(cudaGraphInstantiate(&m_exec, graph, 0)); }
  ~graph_exec() {
    if (m_exec != nullptr) cudaGraphExecDestroy(m_exec);  // errors ignored: destructors never throw
  }
  graph_exec(graph_exec&& other) noexcept : m_exec(std::exchange(other.m_exec, nullptr)) {}
  graph_exec& operator=(graph_exec&& other) noexcept {
    if (this != &other) {
      if (m_exec != nullptr) cudaGraphExecDestroy(m_exec);
      m_exec = std::exchange(other.m_exec, nullptr);
    }
    return *this;
  }
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;

  /// The raw handle.
  cudaGraphExec_t get() const noexcept { return m_exec; }
  /// Uploads the graph's resources to the device ahead of the first launch on `stream`.
  void upload(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaGraphUpload(m_exec, stream)); }
  /// Launches one replay on `stream`.
  void launch(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaGraphLaunch(m_exec, stream)); }

 private:
  cudaGraphExec_t m_exec = nullptr;
};

/// Owns a graph definition; move-only.
class graph {
 public:
  /// An empty handle.
  graph() noexcept = default;
  /// Takes ownership of `g`.
  explicit graph(cudaGraph_t g) noexcept : m_graph(g) {}
  ~graph() {
    if (m_graph != nullptr) cudaGraphDestroy(m_graph);  // errors ignored: destructors never throw
  }
  graph(graph&& other) noexcept : m_graph(std::exchange(other.m_graph, nullptr)) {}
  graph& operator=(graph&& other) noexcept {
    if (this != &other) {
      if (m_graph != nullptr) cudaGraphDestroy(m_graph);
      m_graph = std::exchange(other.m_graph, nullptr);
    }
    return *this;
  }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  /// The raw handle.
  cudaGraph_t get() const noexcept { return m_graph; }
  /// Number of nodes (kernels, memsets, ...) in the graph.
  std::size_t node_count() const {
    std::size_t n = 0;
    GPUCMP_CUDA_CHECK(cudaGraphGetNodes(m_graph, nullptr, &n));
    return n;
  }

 private:
  cudaGraph_t m_graph = nullptr;
};

/// Captures what `record(stream)` enqueues on `stream` (which must not be the legacy
/// default stream) into a graph. Throws cuda_error naming the capture when the recorded
/// code does something a graph cannot hold (synchronisation, legacy-stream work, ...).
template <class Record>
graph capture_graph(cudaStream_t stream, Record&& record) {
  if (stream == nullptr) throw invalid_argument("capture_graph: cannot capture the legacy default stream");
  GPUCMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t captured = nullptr;
  try {
    record(stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &captured);  // end the capture so the stream stays usable
    if (captured != nullptr) cudaGraphDestroy(captured);
    cudaGetLastError();
    throw;
  }
  const cudaError_t code = cudaStreamEndCapture(stream, &captured);
  graph result(captured);
  detail::check_cuda(code, "cudaStreamEndCapture (the captured code did something a CUDA graph cannot hold)",
                     __FILE__, __LINE__);
  return result;
}

}  // namespace gpucmp
