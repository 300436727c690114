// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One inference convolution layer -- conv, bias, (residual add), (ReLU) -- as a standalone
// operation on the contract (ops/operation.hpp), on random operands it owns: the layer a
// network runs in that precision (models/fused_conv.cuh for FP32, TF32, FP16 and BF16;
// models/quantized_conv.cuh for FP8 E4M3 and INT8, with per-channel scales), so one layer of
// a network can be timed alone and the precisions compared shape by shape
// (benchmarks/conv_layers.cu). Components gpucmp::cudnn and gpucmp::cublas (a 1x1 INT8 layer
// also runs as a cuBLASLt matmul).
//
//   gpucmp::conv_layer_options o;             // bias + ReLU, timed search
//   gpucmp::conv_layer op(problem, o, stream); // problem.dtype: fp16, ..., fp8_e4m3, int8
//   gpucmp::prepare_verified(op);              // search, then the check against FP64
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/fused_conv.cuh>
#include <gpucmp/models/quantized_conv.cuh>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/specs/work.hpp>

#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// How a conv_layer is prepared.
struct conv_layer_options {
  conv_epilogue epilogue;                               ///< bias always; residual add and ReLU as asked
  algorithm_choice choice = algorithm_choice::search;   ///< the heuristic's first candidate, or the timed search
  search_options search;                                ///< how candidates are timed
  int candidates_per_path = 4;                          ///< per way of running it (fusion_path)
  std::size_t workspace_limit = std::size_t{1} << 30;   ///< largest workspace a candidate may use
  std::uint64_t seed = 1;                               ///< operands' random streams
};

/// What a conv_layer runs, as the contract records it.
struct conv_layer_algorithm {
  fused_conv_algorithm layer;                              ///< the path and the cuDNN engine
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< how

  /// The layer's description ("fused graph: engine 7 ...").
  std::string describe() const { return layer.describe(); }
};

/// One convolution layer with its epilogue on its own random operands (this header's opening
/// comment). The constructor prepares: it checks the problem, allocates and fills the
/// operands and enumerates the candidates; it times nothing.
class conv_layer {
 public:
  /// Throws invalid_argument or unsupported naming what is wrong with the problem (a
  /// quantized layer takes NHWC only), unsupported when cuDNN runs it no way.
  conv_layer(const conv_problem& problem, const conv_layer_options& options, cudaStream_t stream)
      : m_problem(problem), m_options(options) {
    cudnnHandle_t h = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&h));
    m_handle = handle_t(h);
    if (quantized()) {
      cublasLtHandle_t lt = nullptr;
      GPUCMP_CUBLAS_CHECK(cublasLtCreate(&lt));
      m_cublaslt = lt_handle_t(lt);
      m_quantized_operands = std::make_unique<quantized_conv_operands>(problem, 1.5, options.seed, stream);
      auto set = std::make_shared<const quantized_conv_candidates>(quantized_conv_libraries{h, lt}, problem, options.epilogue,
                                                                   options.candidates_per_path, options.workspace_limit);
      allocate_workspace(*set);
      m_quantized = std::make_unique<quantized_conv>(set, m_quantized_operands->tensors(options.epilogue.residual),
                                                     m_workspace.data(), m_workspace.bytes());
    } else {
      problem.validate();
      const std::size_t stored = activation_bytes(problem.dtype);
      for (auto [buffer, elements] : {std::pair{&m_x, problem.x_elements()}, std::pair{&m_w, problem.w_elements()},
                                      std::pair{&m_bias, double(problem.k)}, std::pair{&m_z, problem.y_elements()},
                                      std::pair{&m_y, problem.y_elements()}}) {
        *buffer = device_buffer<unsigned char>(std::size_t(elements) * stored, initial_fill::uninitialized());
      }
      std::uint64_t seed = options.seed;
      visit_floating_storage(types_of(problem.dtype).output, [&](auto zero) {
        using T = decltype(zero);
        for (auto* buffer : {&m_x, &m_w, &m_bias, &m_z}) {
          fill_uniform(reinterpret_cast<T*>(buffer->data()), buffer->bytes() / sizeof(T), seed++, -1, 1, stream);
        }
      });
      auto set = std::make_shared<const fused_conv_candidates>(h, problem, options.epilogue, options.candidates_per_path,
                                                               options.workspace_limit);
      allocate_workspace(*set);
      m_fused = std::make_unique<fused_conv>(
          set,
          fused_conv_tensors{m_x.data(), m_w.data(), m_bias.data(), options.epilogue.residual ? m_z.data() : nullptr, m_y.data()},
          m_workspace.data(), m_workspace.bytes());
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_chosen.layer = quantized() ? m_quantized->algorithm() : m_fused->algorithm();
  }

  /// "conv_layer/int8_nhwc/n32_c64_h56_w56_k64_r3_s3_p1_u1/bias+relu".
  std::string name() const {
    return "conv_layer/" + (quantized() ? m_quantized->candidates().name() : m_fused->candidates().name());
  }
  /// One call: direct-convolution FLOPs (integer multiply-adds for INT8); x, w, the bias (and
  /// z, and the scales of a quantized layer) read once, y written once, each in its stored type.
  gpucmp::work work() const {
    const conv_problem& p = m_problem;
    const double stored = double(quantized() ? element_bytes(quantized_storage(p.dtype)) : activation_bytes(p.dtype));
    const double bias = double(quantized() ? sizeof(float) : activation_bytes(p.dtype));
    gpucmp::work w;
    w.flops = p.flops();
    w.bytes_read = (p.x_elements() + p.w_elements() + (m_options.epilogue.residual ? p.y_elements() : 0)) * stored +
                   double(p.k) * bias * (quantized() ? 2 : 1);
    w.bytes_written = p.y_elements() * stored;
    w.items = double(p.n);
    w.arithmetic = peak_precision(p.dtype);
    return w;
  }
  /// The problem's axes, and the epilogue's.
  std::vector<axis> axes() const {
    std::vector<axis> a = m_problem.axes();
    a.push_back(axis::of("epilogue", to_string(m_options.epilogue)));
    a.push_back(axis::of("choice", to_string(m_options.choice)));
    return a;
  }
  std::string provider() const { return "cuDNN"; }  ///< see axes()
  std::vector<std::pair<std::string, std::string>> libraries() const { return cudnn_libraries(); }  ///< see axes()

  std::size_t candidate_count() const noexcept { return quantized() ? m_quantized->candidate_count() : m_fused->candidate_count(); }
  std::string describe_candidate(std::size_t i) const {
    return quantized() ? m_quantized->describe_candidate(i) : m_fused->describe_candidate(i);
  }
  int candidate_group(std::size_t i) const { return quantized() ? m_quantized->candidate_group(i) : m_fused->candidate_group(i); }
  void select(std::size_t i, cudaStream_t stream) {
    if (quantized()) {
      m_quantized->select(i, stream);
    } else {
      m_fused->select(i, stream);
    }
    m_chosen.layer = quantized() ? m_quantized->algorithm() : m_fused->algorithm();
  }
  void operator()(cudaStream_t stream) const {
    if (quantized()) {
      (*m_quantized)(stream);
    } else {
      (*m_fused)(stream);
    }
  }
  /// The layer's own check: every output of a small layer, 16,384 of a large one, against
  /// its FP64 reference (with the scales' rounding for a quantized one).
  verification verify(cudaStream_t stream) const { return quantized() ? m_quantized->verify(stream) : m_fused->verify(stream); }
  algorithm_choice choice() const noexcept { return m_options.choice; }
  const search_options& search_settings() const noexcept { return m_options.search; }
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    if (quantized()) {
      m_quantized->adopt_search(chosen, std::move(log));
    } else {
      m_fused->adopt_search(chosen, std::move(log));
    }
    m_chosen.layer = quantized() ? m_quantized->algorithm() : m_fused->algorithm();
    m_chosen.chosen_by = algorithm_choice::search;
  }
  const std::vector<candidate_time>& search_log() const noexcept {
    return quantized() ? m_quantized->search_log() : m_fused->search_log();
  }
  const conv_layer_algorithm& algorithm() const noexcept { return m_chosen; }

 private:
  using handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;
  using lt_handle_t = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;

  bool quantized() const noexcept {
    return std::find(std::begin(quantized_conv_numerics), std::end(quantized_conv_numerics), m_problem.dtype) !=
           std::end(quantized_conv_numerics);
  }
  template <class Candidates>
  void allocate_workspace(const Candidates& set) {
    std::size_t most = 0;
    for (std::size_t i = 0; i < set.size(); ++i) most = std::max(most, set.info(i).conv.workspace);
    if (most != 0) m_workspace = device_buffer<unsigned char>(most, initial_fill::uninitialized());
  }

  conv_problem m_problem;
  conv_layer_options m_options;
  handle_t m_handle;       // before the layers, which use them (and are destroyed first)
  lt_handle_t m_cublaslt;  // quantized layers only
  device_buffer<unsigned char> m_x, m_w, m_bias, m_z, m_y, m_workspace;
  std::unique_ptr<quantized_conv_operands> m_quantized_operands;
  std::unique_ptr<fused_conv> m_fused;
  std::unique_ptr<quantized_conv> m_quantized;
  conv_layer_algorithm m_chosen;
};

}  // namespace gpucmp
