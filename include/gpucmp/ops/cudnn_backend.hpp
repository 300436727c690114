// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A thin RAII layer over cuDNN's backend (graph) API: one owned descriptor, typed attribute
// setters and getters that throw gpucmp errors naming the attribute. The backend API reaches
// every engine and knob configuration cuDNN has; the legacy cudnnConvolution* calls reach
// one configuration per algorithm enum.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
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
/// `uid` names it in variant packs; a virtual one lives only inside a fused operation graph.
inline backend_descriptor make_backend_tensor(std::int64_t uid, cudnnDataType_t type, const std::vector<std::int64_t>& dims,
                                              const std::vector<std::int64_t>& strides, bool is_virtual = false) {
  backend_descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  t.set(CUDNN_ATTR_TENSOR_STRIDES, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  const std::int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  t.finalize("tensor");
  return t;
}

/// Per-channel statistics of a convolution's output, fused into its operation graph: a
/// finalized gen-stats operation reading `y` and writing its sum and sum of squares (FP32
/// tensors of [1, k, 1, 1]), accumulated in FP32 whatever `y`'s type.
inline backend_descriptor make_genstats_operation(const backend_descriptor& y, const backend_descriptor& sum,
                                                  const backend_descriptor& squares) {
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  backend_descriptor op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, squares);
  op.finalize("gen-stats operation");
  return op;
}

/// A finalized execution plan for one engine configuration a heuristic offered.
struct backend_plan {
  std::shared_ptr<backend_descriptor> plan;                  ///< finalized
  std::int64_t engine = -1;                                  ///< the engine's global index
  std::vector<cudnnBackendNumericalNote_t> numerical_notes;  ///< TENSOR_CORE, WINOGRAD, ...
  std::vector<cudnnBackendBehaviorNote_t> behavior_notes;    ///< RUNTIME_COMPILATION, ...
  std::size_t workspace = 0;                                 ///< bytes it needs
  int rank = 0;                                              ///< place in heuristic mode A's list, then the fallback list's
  bool fallback = false;                                     ///< from the fallback list
};

/// Execution plans for `graph` from heuristic mode A, then the fallback list (an engine the
/// first list already gave is skipped), in that order. Configurations whose numerical notes
/// `allowed(notes)` rejects, that do not finalize or that need more than `workspace_limit`
/// are left out; enumeration stops at `cap` plans (finalizing compiles runtime-compiled
/// engines, so only what is needed is finalized).
template <class Allowed>
std::vector<backend_plan> heuristic_plans(cudnnHandle_t handle, const backend_descriptor& graph, Allowed&& allowed,
                                          std::size_t workspace_limit,
                                          std::size_t cap = std::numeric_limits<std::size_t>::max()) {
  std::vector<backend_plan> out;
  std::set<std::int64_t> seen;
  int rank = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    backend_descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!heur.try_finalize()) continue;
    std::int64_t count = 0;
    check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                         nullptr),
                "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count)");
    std::vector<backend_descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    std::int64_t returned = 0;
    check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         &returned, raw.data()),
                "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    for (std::int64_t i = 0; i < returned && out.size() < cap; ++i, ++rank) {
      backend_descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      cudnnBackendDescriptor_t engine_raw = engine.get();
      std::int64_t got = 0;
      if (cudnnBackendGetAttribute(raw[std::size_t(i)], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                   &engine_raw) != CUDNN_STATUS_SUCCESS) {
        continue;
      }
      backend_plan p;
      p.engine = engine.get_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
      p.rank = rank;
      p.fallback = mode == CUDNN_HEUR_MODE_FALLBACK;
      if (p.fallback && seen.count(p.engine)) continue;  // usually a repeat of mode A's
      p.numerical_notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
      std::int64_t notes = 0;
      if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   std::int64_t(p.numerical_notes.size()), &notes, p.numerical_notes.data()) != CUDNN_STATUS_SUCCESS) {
        notes = 0;
      }
      p.numerical_notes.resize(std::size_t(notes));
      if (!allowed(p.numerical_notes)) continue;
      p.behavior_notes.resize(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
      std::int64_t behaviors = 0;
      if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                   std::int64_t(p.behavior_notes.size()), &behaviors, p.behavior_notes.data()) != CUDNN_STATUS_SUCCESS) {
        behaviors = 0;
      }
      p.behavior_notes.resize(std::size_t(behaviors));
      p.plan = std::make_shared<backend_descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      p.plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      p.plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[std::size_t(i)]);
      if (!p.plan->try_finalize()) continue;
      const std::int64_t workspace = p.plan->get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
      if (workspace < 0 || std::size_t(workspace) > workspace_limit) continue;
      p.workspace = std::size_t(workspace);
      seen.insert(p.engine);
      out.push_back(std::move(p));
    }
  }
  return out;
}

/// A finalized forward-convolution descriptor: cross-correlation, FP32 compute, 2-D with
/// symmetric padding.
inline backend_descriptor make_backend_convolution(std::int64_t pad_h, std::int64_t pad_w, std::int64_t stride_h,
                                                   std::int64_t stride_w, std::int64_t dilation_h, std::int64_t dilation_w) {
  backend_descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t dims = 2;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, std::vector<std::int64_t>{dilation_h, dilation_w});
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, std::vector<std::int64_t>{stride_h, stride_w});
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, std::vector<std::int64_t>{pad_h, pad_w});
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, std::vector<std::int64_t>{pad_h, pad_w});
  conv.finalize("convolution");
  return conv;
}

}  // namespace gpucmp::detail
