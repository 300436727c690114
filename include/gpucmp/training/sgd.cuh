// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The optimizer step of a whole network as one kernel launch: every parameter tensor's SGD
// update (training/sgd.hpp's rule) from one table of chunks, FP32 master weights and momentum,
// gradients in FP32, FP16 or BF16, and the low-precision copy the forward pass reads written
// in the same pass. With mixed precision it reads the loss scale and the skip flag of
// training/loss_scale.cuh on the device: a flagged step changes nothing, otherwise gradients
// are divided by the scale. Nothing synchronises the host, so the step fits in a CUDA graph.
// The element rule is a template parameter: AdamW is another rule over the same table.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/training/loss_scale.cuh>
#include <gpucmp/training/sgd.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpucmp {

/// One parameter tensor an optimizer updates. Pointers are device pointers; the optimizer
/// does not own them.
template <class Gradient, class Model>
struct optimizer_tensor {
  float* master = nullptr;            ///< FP32 master weights, updated in place
  const Gradient* gradient = nullptr; ///< the (scaled) gradient of the step
  float* momentum = nullptr;          ///< FP32 momentum buffer (may be null with momentum 0)
  Model* model_copy = nullptr;        ///< the copy the forward pass reads, rewritten from the master (may be null)
  std::size_t count = 0;              ///< elements
};

namespace detail {

/// A slice of one tensor that one block updates.
struct optimizer_chunk {
  std::uint32_t tensor;
  std::size_t first, count;
};

template <class Model>
__device__ inline Model optimizer_store(float v);
template <>
__device__ inline float optimizer_store<float>(float v) { return v; }
template <>
__device__ inline __half optimizer_store<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 optimizer_store<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/// sgd.hpp's rule on one element, on the device.
struct sgd_rule {
  sgd_options o;
  __device__ void operator()(float& p, float g, float& m, bool first) const {
    float d = g + o.weight_decay * p;
    if (o.momentum != 0.0f) {
      m = first ? d : o.momentum * m + d;
      d = o.nesterov ? d + o.momentum * m : m;
    }
    p -= o.learning_rate * d;
  }
};

// One block per chunk. Skipped when *skip is set; gradients divided by *scale when given.
template <class Gradient, class Model, class Rule>
__global__ void optimizer_step_kernel(const optimizer_chunk* chunks, const optimizer_tensor<Gradient, Model>* tensors,
                                      Rule rule, const float* scale, const std::int32_t* skip, const std::int64_t* steps) {
  if (skip != nullptr && *skip != 0) return;
  const float inv_scale = scale != nullptr ? 1.0f / *scale : 1.0f;
  const bool first = *steps == 0;
  const optimizer_chunk c = chunks[blockIdx.x];
  const optimizer_tensor<Gradient, Model> t = tensors[c.tensor];
  for (std::size_t i = c.first + threadIdx.x; i < c.first + c.count; i += blockDim.x) {
    float p = t.master[i];
    float m = t.momentum != nullptr ? t.momentum[i] : 0.0f;
    rule(p, gradient_value(t.gradient[i]) * inv_scale, m, first);  // gradient_value: loss_scale.cuh
    t.master[i] = p;
    if (t.momentum != nullptr) t.momentum[i] = m;
    if (t.model_copy != nullptr) t.model_copy[i] = optimizer_store<Model>(p);
  }
}

// Counts the step unless it was skipped (after every block of the update has read the count).
template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void count_optimizer_step(std::int64_t* steps, const std::int32_t* skip) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && (skip == nullptr || *skip == 0)) ++*steps;
}

}  // namespace detail

/// SGD over a fixed set of parameter tensors, one launch per step. Owns the chunk table and
/// the step count on the device (the tensors stay the caller's); enqueues on the stream it
/// is given.
template <class Gradient = float, class Model = float>
class multi_tensor_sgd {
 public:
  static constexpr std::size_t chunk_elements = std::size_t{1} << 16;  ///< elements per block

  /// Plans the chunks of `tensors` and uploads the table on `stream` (and waits). Throws
  /// invalid_argument for bad options, an empty or null tensor, or a tensor without a
  /// momentum buffer when momentum is on.
  multi_tensor_sgd(std::vector<optimizer_tensor<Gradient, Model>> tensors, const sgd_options& options, cudaStream_t stream)
      : m_options(options), m_count(tensors.size()) {
    m_options.validate();
    if (tensors.empty()) throw invalid_argument("multi_tensor_sgd: no tensors");
    std::vector<detail::optimizer_chunk> chunks;
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const auto& t = tensors[k];
      const std::string which = "multi_tensor_sgd: tensor " + std::to_string(k);
      if (t.count == 0 || t.master == nullptr || t.gradient == nullptr) throw invalid_argument(which + " has no elements, master or gradient");
      if (m_options.momentum != 0 && t.momentum == nullptr) throw invalid_argument(which + " has no momentum buffer, and momentum is on");
      for (std::size_t first = 0; first < t.count; first += chunk_elements) {
        chunks.push_back({std::uint32_t(k), first, std::min(chunk_elements, t.count - first)});
      }
    }
    m_chunks = chunks.size();
    m_table = device_buffer<unsigned char>(tensors.size() * sizeof(tensors[0]) + chunks.size() * sizeof(chunks[0]) +
                                               sizeof(std::int64_t),
                                           initial_fill::uninitialized());
    std::vector<unsigned char> host(m_table.bytes(), 0);  // the step count (last) starts at 0
    std::memcpy(host.data(), tensors.data(), tensors.size() * sizeof(tensors[0]));
    std::memcpy(host.data() + chunks_offset(), chunks.data(), chunks.size() * sizeof(chunks[0]));
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_table.data(), host.data(), host.size(), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` is a local
  }

  /// Enqueues one update of every tensor on `stream`. `scale` and `skip` (device pointers,
  /// both or neither: dynamic_loss_scale's scale() and skip_step()) make it a mixed-precision
  /// step: skipped when the flag is set, gradients divided by the scale otherwise.
  void step(cudaStream_t stream, const float* scale = nullptr, const std::int32_t* skip = nullptr) {
    detail::optimizer_step_kernel<Gradient, Model, detail::sgd_rule><<<unsigned(m_chunks), 256, 0, stream>>>(
        chunks(), tensors(), detail::sgd_rule{m_options}, scale, skip, steps());
    GPUCMP_CUDA_CHECK_LAST("optimizer_step_kernel (sgd)");
    detail::count_optimizer_step<><<<1, 1, 0, stream>>>(steps(), skip);
    GPUCMP_CUDA_CHECK_LAST("count_optimizer_step");
  }

  /// Back to no steps taken (the next step starts the momentum afresh), on `stream`.
  void reset(cudaStream_t stream) { GPUCMP_CUDA_CHECK(cudaMemsetAsync(steps(), 0, sizeof(std::int64_t), stream)); }

  /// Steps taken (not skipped) after the work queued on `stream` (synchronizes `stream`).
  std::int64_t steps_taken(cudaStream_t stream) const {
    std::int64_t n = 0;
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(&n, steps(), sizeof n, cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return n;
  }

  /// Blocks of one launch (each updates up to chunk_elements values of one tensor).
  std::size_t chunk_count() const noexcept { return m_chunks; }
  /// The options it runs with.
  const sgd_options& options() const noexcept { return m_options; }

 private:
  std::size_t chunks_offset() const noexcept { return m_count * sizeof(optimizer_tensor<Gradient, Model>); }
  const optimizer_tensor<Gradient, Model>* tensors() const noexcept {
    return reinterpret_cast<const optimizer_tensor<Gradient, Model>*>(m_table.data());
  }
  const detail::optimizer_chunk* chunks() const noexcept {
    return reinterpret_cast<const detail::optimizer_chunk*>(m_table.data() + chunks_offset());
  }
  std::int64_t* steps() const noexcept {
    return reinterpret_cast<std::int64_t*>(const_cast<unsigned char*>(m_table.data()) + chunks_offset() +
                                           m_chunks * sizeof(detail::optimizer_chunk));
  }

  sgd_options m_options;
  std::size_t m_count;      // tensors
  std::size_t m_chunks = 0;
  device_buffer<unsigned char> m_table;  // tensors, then chunks, then the step count
};

}  // namespace gpucmp
