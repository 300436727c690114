// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RAII CUDA graphs and stream capture. Graph replay launches a whole batch with one call,
// which removes most of the per-launch gap from batched measurements.
#pragma once

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace gpucmp {

/// Owns an instantiated, launchable graph; move-only.
class graph_exec {
 public:
  /// An empty handle.
  graph_exec() noexcept = default;
  /// Instantiates `graph` (which stays owned by the caller).
  explicit graph_exec(cudaGraph_t graph) {
    cudaGraphExec_t exec = nullptr;
    GPUCMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    m_exec = handle(exec);
  }

  /// The raw handle.
  cudaGraphExec_t get() const noexcept { return m_exec.get(); }
  /// Uploads the graph's resources to the device ahead of the first launch on `stream`.
  void upload(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaGraphUpload(get(), stream)); }
  /// Launches one replay on `stream`.
  void launch(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaGraphLaunch(get(), stream)); }

 private:
  using handle = detail::unique_handle<cudaGraphExec_t, cudaGraphExecDestroy>;
  handle m_exec;
};

/// Owns a graph definition; move-only.
class graph {
 public:
  /// An empty handle.
  graph() noexcept = default;
  /// Takes ownership of `g`.
  explicit graph(cudaGraph_t g) noexcept : m_graph(g) {}

  /// The raw handle.
  cudaGraph_t get() const noexcept { return m_graph.get(); }
  /// Number of nodes (kernels, memsets, ...) in the graph.
  std::size_t node_count() const {
    std::size_t n = 0;
    GPUCMP_CUDA_CHECK(cudaGraphGetNodes(get(), nullptr, &n));
    return n;
  }

 private:
  detail::unique_handle<cudaGraph_t, cudaGraphDestroy> m_graph;
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
