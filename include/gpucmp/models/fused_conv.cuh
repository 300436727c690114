// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A convolution layer for inference with its epilogue fused: y = act(conv(x, w) + bias [+ z]),
// NHWC or NCHW, on tensors a network owns (component gpucmp::cudnn). Batch norm is folded
// into w and bias beforehand (models/batch_norm_folding.hpp), so a conv-BN-ReLU-(add) block of
// a CNN is one pass over memory instead of the three or four a framework's eager mode makes.
//
// Three ways to run it compete in a timed search, and the fastest that verifies is kept:
//  - a cuDNN graph conv -> add bias -> (add z) -> (ReLU) with virtual FP32 intermediates
//    (cudnn-frontend, ops/cudnn_graph.hpp), on whichever plan cuDNN's heuristics offer (one
//    kernel when fusable);
//  - cudnnConvolutionBiasActivationForward, the legacy fused call (its IMPLICIT_PRECOMP_GEMM
//    ran the 3-channel stem fastest in the ops sweep);
//  - the best plain convolution followed by gpucmp's own bias/residual/ReLU kernel (always
//    possible: FP32 without tensor cores, odd channel counts).
// Layers of the same shape share one candidate set, so a network searches each shape once.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/guard_band.cuh>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/conv_graph.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/cudnn_legacy.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// What follows the convolution in a fused layer (a per-channel bias always does).
struct conv_epilogue {
  bool residual = false;  ///< adds a tensor z of the output's shape (a ResNet shortcut)
  bool relu = true;       ///< ReLU last
};

/// "bias", "bias+relu", "bias+add+relu", ...
inline std::string to_string(const conv_epilogue& e) {
  return std::string("bias") + (e.residual ? "+add" : "") + (e.relu ? "+relu" : "");
}

/// A convolution layer's name in results: "fp16_nhwc/n32_c64_h56_w56_k64_r3_s3_p1_u1/bias+relu".
inline std::string conv_layer_name(const conv_problem& p, const conv_epilogue& e) {
  return std::string(to_string(p.dtype)) + "_" + to_string(p.layout) + "/" + p.shape_name() + "/" + to_string(e);
}

/// How a fused layer runs.
enum class fusion_path {
  fused_graph,           ///< a cuDNN graph conv -> pointwise ops (one engine)
  legacy_fused,          ///< cudnnConvolutionBiasActivationForward
  conv_then_kernel,      ///< a plain cuDNN convolution, then gpucmp's epilogue kernel
  cublaslt_matmul,       ///< a 1x1 layer as one cuBLASLt matmul with its epilogue (INT8: models/matmul_conv.cuh)
  gpucmp_implicit_gemm,  ///< a quantized layer as gpucmp's tensor-core kernel (models/quantized_conv_kernel.cuh)
};

/// "fused graph", "legacy fused", "conv + epilogue kernel".
inline const char* to_string(fusion_path p) noexcept {
  switch (p) {
    case fusion_path::fused_graph: return "fused graph";
    case fusion_path::legacy_fused: return "legacy fused";
    case fusion_path::conv_then_kernel: return "conv + epilogue kernel";
    case fusion_path::cublaslt_matmul: return "cuBLASLt matmul";
    case fusion_path::gpucmp_implicit_gemm: return "gpucmp implicit GEMM";
  }
  return "unknown";
}

/// The fusion_path named "fused_graph", "legacy_fused", "conv_then_kernel", "cublaslt_matmul"
/// or "gpucmp_implicit_gemm"; throws invalid_argument otherwise.
inline fusion_path parse_fusion_path(const std::string& text) {
  if (text == "fused_graph") return fusion_path::fused_graph;
  if (text == "legacy_fused") return fusion_path::legacy_fused;
  if (text == "conv_then_kernel") return fusion_path::conv_then_kernel;
  if (text == "cublaslt_matmul") return fusion_path::cublaslt_matmul;
  if (text == "gpucmp_implicit_gemm") return fusion_path::gpucmp_implicit_gemm;
  throw invalid_argument("unknown fusion path '" + text +
                         "' (fused_graph, legacy_fused, conv_then_kernel, cublaslt_matmul, gpucmp_implicit_gemm)");
}

/// Every fusion path an FP16, BF16 or FP32 layer takes (fused_conv), in the order candidates
/// are listed; quantized layers take their own (quantized_conv_candidates).
inline std::vector<fusion_path> all_fusion_paths() {
  return {fusion_path::fused_graph, fusion_path::legacy_fused, fusion_path::conv_then_kernel};
}

/// The device tensors one fused layer reads and writes, in the problem's layout (NHWC: x
/// N x H x W x C, filters K x R x S x C; NCHW: N x C x H x W and K x C x R x S).
struct fused_conv_tensors {
  const void* x = nullptr;         ///< input
  const void* w = nullptr;         ///< filters
  const void* bias = nullptr;      ///< K
  const void* residual = nullptr;  ///< z, the output's shape and layout (with epilogue.residual)
  void* y = nullptr;               ///< output, N x P x Q x K (NHWC) or N x K x P x Q (NCHW)
  /// Bytes after y that belong to no tensor (0: none): verify() fills them with
  /// guard_pattern before the run and fails when the run changed them.
  std::size_t y_guard = 0;
};

namespace detail {

// y = act(y + bias[k] + z): the epilogue of the conv_then_kernel path, in place. Element i
// is of channel (i / plane) % k: plane 1 in NHWC, P x Q in NCHW.
template <class T>
__global__ void bias_residual_relu_kernel(T* y, const T* bias, const T* z, std::int64_t count, std::int64_t k,
                                          std::int64_t plane, bool relu) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float v = float(to_double(y[i])) + float(to_double(bias[(i / plane) % k]));
    if (z != nullptr) v += float(to_double(z[i]));
    if (relu) v = fmaxf(v, 0.0f);
    y[i] = from_double<T>(v);
  }
}

// One warp per checked output of a fused layer: the double reference of the convolution
// (detail::conv_reference_terms), then bias, residual and ReLU in double.
template <class T>
__global__ void fused_conv_reference_kernel(conv_geometry g, const T* x, const T* w, const T* bias, const T* z,
                                            const T* y, bool relu, const std::int64_t* outputs, std::size_t count,
                                            double* reference, double* conv_part, double* l2, double* got) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (warp >= count) return;
  double sum = 0, squares = 0;
  conv_reference_terms(conv_direction::forward, g, x, w, y, outputs[warp], lane, 32, sum, squares);
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
    squares += __shfl_down_sync(0xffffffffu, squares, offset);
  }
  if (lane == 0) {
    const std::int64_t out = outputs[warp];
    const std::int64_t ki = (out / (g.q * g.p)) % g.k;
    const std::int64_t at = conv_output_offset(conv_direction::forward, g, out);
    double v = sum + to_double(bias[ki]);
    if (z != nullptr) v += to_double(z[at]);
    if (relu) v = v > 0 ? v : 0.0;
    reference[warp] = v;
    conv_part[warp] = sum;
    l2[warp] = sqrt(squares);
    got[warp] = to_double(y[at]);
  }
}


// Every output of a fused layer checked on the GPU (one warp each): the double reference, the
// allowed error from `tol`'s fields (as tolerance::bound), and per-block summaries, so that
// nothing but three numbers crosses to the host.
template <class T>
__global__ void fused_conv_check_all_kernel(conv_geometry g, const T* x, const T* w, const T* bias, const T* z, const T* y,
                                            bool relu, tolerance tol, double length, unsigned long long* failed,
                                            unsigned long long* worst_bits, unsigned long long* worst_index) {
  const std::int64_t outputs = g.n * g.k * g.p * g.q;
  const std::int64_t warps = (std::int64_t(gridDim.x) * blockDim.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  for (std::int64_t out = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32; out < outputs; out += warps) {
    double sum = 0, squares = 0;
    conv_reference_terms(conv_direction::forward, g, x, w, y, out, lane, 32, sum, squares);
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
      squares += __shfl_down_sync(0xffffffffu, squares, offset);
    }
    if (lane != 0) continue;
    const std::int64_t ki = (out / (g.q * g.p)) % g.k;
    const std::int64_t at = conv_output_offset(conv_direction::forward, g, out);
    double ref = sum + to_double(bias[ki]);
    if (z != nullptr) ref += to_double(z[at]);
    if (relu) ref = ref > 0 ? ref : 0.0;
    const double per_term = tol.input_eps + tol.transform_eps + tol.accumulate_eps * sqrt(length);
    const double bound = tol.output_eps * fabs(sum) + tol.output_abs + tol.sigmas * per_term * sqrt(squares) +
                         tol.output_eps * fabs(ref) + 1e-300;
    const double err = fabs(to_double(y[at]) - ref);
    const double ratio = err <= bound ? err / bound : (isnan(err) ? 1e300 : err / bound);
    if (!(err <= bound)) atomicAdd(failed, 1ull);
    // Non-negative doubles order like their bit patterns.
    const unsigned long long bits = __double_as_longlong(ratio);
    if (atomicMax(worst_bits, bits) < bits) atomicExch(worst_index, static_cast<unsigned long long>(out));
  }
}

}  // namespace detail

/// The algorithm a fused layer runs, as recorded in its results.
struct fused_conv_algorithm {
  fusion_path path = fusion_path::fused_graph;  ///< how it runs
  conv_algorithm conv;                          ///< the engine or legacy algorithm, workspace, search time

  /// "fused graph: cuDNN engine 7 [TENSOR_CORE] ws 0 B (search: heuristic rank 0)"; a matmul
  /// names its cuBLASLt configuration: "cuBLASLt matmul: algo 66 tile 18 ... ws 0 B (search: ...)",
  /// gpucmp's kernel its tile: "gpucmp implicit GEMM: 128x128x64 tile, 2x4 warps, ... (search)".
  std::string describe() const {
    if (path == fusion_path::gpucmp_implicit_gemm) {
      return std::string(to_string(path)) + ": " + conv.name + " (" + to_string(conv.chosen_by) + ")";
    }
    if (path == fusion_path::cublaslt_matmul) {
      return std::string(to_string(path)) + ": " + conv.name + " ws " + std::to_string(conv.workspace) + " B (" +
             to_string(conv.chosen_by) + ": heuristic rank " + std::to_string(conv.heuristic_rank) + ")";
    }
    return std::string(to_string(path)) + ": " + conv.describe();
  }
};

/// A cuDNN graph's plan `p` as the algorithm a layer running it on `path` records.
inline fused_conv_algorithm backend_conv_algorithm(const cudnn_plan& p, fusion_path path) {
  fused_conv_algorithm a;
  a.path = path;
  a.conv.api = conv_api::backend;
  a.conv.engine = p.engine;
  a.conv.knobs = p.knobs;
  a.conv.name = "engine " + std::to_string(p.engine) + (p.fallback ? " (fallback)" : "");
  a.conv.math = p.notes();
  a.conv.workspace = p.workspace;
  a.conv.heuristic_rank = p.heuristic_rank;
  return a;
}

/// Every way to run one (shape, epilogue) on one cuDNN handle: descriptors, finalized
/// execution plans and legacy algorithms. Shared by the layers of that shape.
class fused_conv_candidates {
 public:
  /// Builds the descriptors and enumerates candidates. `max_per_path` caps each
  /// path's list; `workspace_limit` drops algorithms that need more; without
  /// `allow_transform` Winograd and FFT algorithms are left out.
  fused_conv_candidates(cudnnHandle_t handle, const conv_problem& problem, const conv_epilogue& epilogue,
                        int max_per_path, std::size_t workspace_limit, bool allow_transform = true,
                        const std::vector<fusion_path>& paths = all_fusion_paths())
      : m_handle(handle), m_problem(problem), m_epilogue(epilogue), m_workspace_limit(workspace_limit),
        m_allow_transform(allow_transform) {
    m_problem.validate();
    for (fusion_path quantized_only : {fusion_path::cublaslt_matmul, fusion_path::gpucmp_implicit_gemm}) {
      if (std::find(paths.begin(), paths.end(), quantized_only) != paths.end()) {
        throw invalid_argument("fused conv " + name() + ": the " + to_string(quantized_only) +
                               " path runs quantized layers only");
      }
    }
    create_legacy_descriptors();
    const std::size_t cap = std::size_t(std::max(1, max_per_path));
    auto take = [&](std::vector<candidate> list) {
      if (list.size() > cap) list.resize(cap);
      for (auto& c : list) m_all.push_back(std::move(c));
    };
    // Backend lists are capped (each plan is finalized, some compiled at run time); the
    // legacy lists are short and cheap, and the legacy IMPLICIT_PRECOMP_GEMM, low in its
    // heuristic's list, is what runs a 3-channel stem fastest.
    auto allowed = [&](fusion_path p) { return std::find(paths.begin(), paths.end(), p) != paths.end(); };
    if (allowed(fusion_path::fused_graph)) take(backend_candidates(true, cap));
    if (allowed(fusion_path::legacy_fused)) {
      for (auto& c : legacy_fused_candidates()) m_all.push_back(std::move(c));
    }
    if (allowed(fusion_path::conv_then_kernel)) {
      // Twice: the backend's best plain engines and the legacy algorithms.
      take(backend_candidates(false, cap));
      for (auto& c : legacy_plain_candidates()) m_all.push_back(std::move(c));
    }
    if (m_all.empty()) throw unsupported("no cuDNN algorithm for fused conv " + name());
  }
  fused_conv_candidates(const fused_conv_candidates&) = delete;
  fused_conv_candidates& operator=(const fused_conv_candidates&) = delete;

  /// "fp16_nhwc/n32_c64_h56_w56_k64_r3_s3_p1_u1/bias+relu".
  std::string name() const {
    return conv_layer_name(m_problem, m_epilogue);
  }
  /// The shape.
  const conv_problem& problem() const noexcept { return m_problem; }
  /// The epilogue.
  const conv_epilogue& epilogue() const noexcept { return m_epilogue; }
  /// How many candidates there are.
  std::size_t size() const noexcept { return m_all.size(); }
  /// Candidate `i`'s description.
  const fused_conv_algorithm& info(std::size_t i) const { return m_all.at(i).info; }
  /// The largest workspace any candidate needs.
  std::size_t max_workspace() const noexcept {
    std::size_t most = 0;
    for (const auto& c : m_all) most = std::max(most, c.info.conv.workspace);
    return most;
  }

  /// One layer's tensors bound by the graphs' uids (ops/conv_graph.hpp); built by bind().
  static cudnn_variant_pack make_pack(const fused_conv_tensors& t) {
    namespace uid = detail::conv_uid;
    return {{uid::x, const_cast<void*>(t.x)},       {uid::w, const_cast<void*>(t.w)},
            {uid::y, t.y},                           {uid::bias, const_cast<void*>(t.bias)},
            {uid::residual, const_cast<void*>(t.residual)}};
  }

  /// Enqueues candidate `i` on `stream` (the handle's stream is set here).
  void launch(std::size_t i, const fused_conv_tensors& t, const cudnn_variant_pack& pack, void* workspace,
              std::size_t workspace_bytes, cudaStream_t stream) const {
    const candidate& c = m_all.at(i);
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle, stream));
    const float one = 1.0f, zero = 0.0f;
    switch (c.info.path) {
      case fusion_path::fused_graph:
        m_fused_graph->execute(m_handle, c.plan, pack, workspace);
        return;
      case fusion_path::legacy_fused: {
        GPUCMP_CUDNN_CHECK(cudnnSetConvolutionMathType(m_legacy.conv.get(), c.math));
        // Without a residual z is y with alpha2 = 0 (cuDNN allows z == y).
        const void* z = m_epilogue.residual ? t.residual : t.y;
        GPUCMP_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
            m_handle, &one, m_legacy.x.get(), t.x, m_legacy.w.get(), t.w, m_legacy.conv.get(),
            cudnnConvolutionFwdAlgo_t(c.info.conv.algo), workspace, workspace_bytes, m_epilogue.residual ? &one : &zero,
            m_legacy.y.get(), z, m_bias.get(), t.bias, c.identity ? m_identity.get() : m_relu.get(), m_legacy.y.get(), t.y));
        return;
      }
      case fusion_path::cublaslt_matmul:  // never listed here (quantized_conv_candidates runs them)
      case fusion_path::gpucmp_implicit_gemm:
        throw invalid_argument("fused conv " + name() + ": a " + to_string(c.info.path) + " candidate");
      case fusion_path::conv_then_kernel:
        if (c.info.conv.api == conv_api::backend) {
          m_plain_graph->execute(m_handle, c.plan, pack, workspace);
        } else {
          GPUCMP_CUDNN_CHECK(cudnnSetConvolutionMathType(m_legacy.conv.get(), c.math));
          GPUCMP_CUDNN_CHECK(cudnnConvolutionForward(m_handle, &one, m_legacy.x.get(), t.x, m_legacy.w.get(), t.w,
                                                     m_legacy.conv.get(), cudnnConvolutionFwdAlgo_t(c.info.conv.algo),
                                                     workspace, workspace_bytes, &zero, m_legacy.y.get(), t.y));
        }
        launch_epilogue(t, stream);
        return;
    }
  }

 private:
  struct candidate {
    fused_conv_algorithm info;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    bool identity = false;  // legacy fused: identity activation (no ReLU)
    std::size_t plan = 0;   // graph paths: its index in that path's graph
  };

  using tensor_t = detail::unique_handle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
  using activation_t = detail::unique_handle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

  cudnnDataType_t data_type() const noexcept { return detail::cudnn_data_type(types_of(m_problem.dtype).output); }
  bool fp32_strict() const noexcept { return m_problem.dtype == numerics::fp32; }

  template <class T>
  void launch_epilogue_as(const fused_conv_tensors& t, cudaStream_t stream) const {
    const std::int64_t count = std::int64_t(m_problem.y_elements());
    const unsigned blocks = unsigned(std::min<std::int64_t>((count + 255) / 256, 132 * 16));
    const std::int64_t plane = m_problem.layout == conv_layout::nhwc ? 1 : m_problem.p() * m_problem.q();
    detail::bias_residual_relu_kernel<T><<<blocks, 256, 0, stream>>>(
        static_cast<T*>(t.y), static_cast<const T*>(t.bias),
        m_epilogue.residual ? static_cast<const T*>(t.residual) : nullptr, count, m_problem.k, plane, m_epilogue.relu);
    GPUCMP_CUDA_CHECK_LAST("bias_residual_relu_kernel");
  }
  void launch_epilogue(const fused_conv_tensors& t, cudaStream_t stream) const {
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto zero) { launch_epilogue_as<decltype(zero)>(t, stream); });
  }

  // The legacy API's descriptors (as ops/conv.cuh describes a problem), the bias's, and the
  // two activations the fused call may end with.
  void create_legacy_descriptors() {
    m_legacy = detail::make_legacy_conv_descriptors(m_problem, "fused conv " + name());
    cudnnTensorDescriptor_t b = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
    m_bias = tensor_t(b);
    GPUCMP_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(b, detail::cudnn_format(m_problem.layout), data_type(), 1, int(m_problem.k), 1, 1));
    for (auto [mode, out] : {std::pair{CUDNN_ACTIVATION_RELU, &m_relu}, std::pair{CUDNN_ACTIVATION_IDENTITY, &m_identity}}) {
      cudnnActivationDescriptor_t a = nullptr;
      GPUCMP_CUDNN_CHECK(cudnnCreateActivationDescriptor(&a));
      *out = activation_t(a);
      GPUCMP_CUDNN_CHECK(cudnnSetActivationDescriptor(a, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
  }

  // The legacy heuristic's forward algorithms allowed for this precision, best first.
  std::vector<cudnnConvolutionFwdAlgoPerf_t> legacy_algorithms() const {
    constexpr int max_algos = 16;
    cudnnConvolutionFwdAlgoPerf_t perf[max_algos];
    int returned = 0;
    GPUCMP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(m_handle, m_legacy.x.get(), m_legacy.w.get(), m_legacy.conv.get(),
                                                              m_legacy.y.get(), max_algos, &returned, perf));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> out;
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > m_workspace_limit) continue;
      if (fp32_strict() && perf[i].mathType != CUDNN_FMA_MATH) continue;
      const std::string algo = detail::cudnn_algo_name(conv_direction::forward, int(perf[i].algo));
      if (!m_allow_transform && (algo.find("FFT") != std::string::npos || algo.find("WINOGRAD") != std::string::npos)) continue;
      out.push_back(perf[i]);
    }
    return out;
  }

  candidate legacy_candidate(const cudnnConvolutionFwdAlgoPerf_t& perf, fusion_path path, int rank) const {
    candidate c;
    c.info.path = path;
    c.info.conv.api = conv_api::legacy;
    c.info.conv.algo = int(perf.algo);
    c.info.conv.name = detail::cudnn_algo_name(conv_direction::forward, c.info.conv.algo);
    c.info.conv.math = detail::cudnn_math_name(perf.mathType);
    c.info.conv.workspace = perf.memory;
    c.info.conv.heuristic_rank = rank;
    c.math = perf.mathType;
    return c;
  }

  std::vector<candidate> legacy_plain_candidates() const {
    std::vector<candidate> out;
    int rank = 0;
    for (const auto& perf : legacy_algorithms()) out.push_back(legacy_candidate(perf, fusion_path::conv_then_kernel, rank++));
    return out;
  }

  // cudnnConvolutionBiasActivationForward runs an identity activation only with
  // IMPLICIT_PRECOMP_GEMM (cuDNN's documented restriction).
  std::vector<candidate> legacy_fused_candidates() const {
    std::vector<candidate> out;
    int rank = 0;
    for (const auto& perf : legacy_algorithms()) {
      candidate c = legacy_candidate(perf, fusion_path::legacy_fused, rank++);
      c.identity = !m_epilogue.relu;
      if (c.identity && perf.algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) continue;
      out.push_back(std::move(c));
    }
    return out;
  }

  // The graph: the convolution writing y (fused = false), or conv -> add bias -> (add z) ->
  // (ReLU) writing y. Defined at the end of this header, in host compilation passes only
  // (ops/cudnn_graph.hpp).
  void describe_graph(cudnn_frontend::graph::Graph& g, bool fused) const;

  // Heuristic mode A, then the fallback list, as built plans within the workspace limit and
  // the precision's numerics (FP32 forbids tensor cores and converting its inputs down; no
  // transforms without allow_transform); none when cuDNN refuses the graph.
  std::vector<candidate> backend_candidates(bool fused, std::size_t cap) {
    std::vector<candidate> out;
    std::shared_ptr<const cudnn_graph> graph;
    try {
      graph = std::make_shared<const cudnn_graph>(
          m_handle, [&](cudnn_frontend::graph::Graph& g) { describe_graph(g, fused); },
          cudnn_numerics{!fp32_strict(), m_allow_transform}, m_workspace_limit, cap, "fused conv " + name());
    } catch (const unsupported&) {
      return out;  // no engine fuses it (or runs it): the other paths compete
    }
    for (std::size_t i = 0; i < graph->size(); ++i) {
      candidate c;
      c.info = backend_conv_algorithm(graph->plan(i), fused ? fusion_path::fused_graph : fusion_path::conv_then_kernel);
      c.plan = i;
      out.push_back(std::move(c));
    }
    (fused ? m_fused_graph : m_plain_graph) = std::move(graph);
    return out;
  }

  cudnnHandle_t m_handle;
  conv_problem m_problem;
  conv_epilogue m_epilogue;
  std::size_t m_workspace_limit;
  bool m_allow_transform;
  detail::legacy_conv_descriptors m_legacy;
  tensor_t m_bias;
  activation_t m_relu, m_identity;
  std::shared_ptr<const cudnn_graph> m_fused_graph, m_plain_graph;  // null where cuDNN refused it
  std::vector<candidate> m_all;
};

/// What a convolution layer over a shared candidate set keeps of its search: the candidates
/// its workspace fits, the one it runs, the search's timings and its workspace. The search
/// members of the operation contract (ops/operation.hpp), written once for fused_conv and
/// quantized_conv; `Set` describes candidate `i` as info(i), a fused_conv_algorithm.
template <class Set>
class conv_layer_search {
 public:
  /// The candidates a search times: those of the shared set the layer can run.
  std::size_t candidate_count() const noexcept { return m_usable.size(); }
  /// What search candidate `i` runs.
  std::string describe_candidate(std::size_t i) const { return m_set->info(m_usable.at(i)).describe(); }
  /// Runs search candidate `i` from now on (its verification tolerance comes with it), on a
  /// workspace zeroed on `stream`: no candidate sees another's leftovers.
  void select(std::size_t i, cudaStream_t stream) {
    run_candidate(m_usable.at(i));
    if (m_workspace_bytes != 0) GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_workspace, 0, m_workspace_bytes, stream));
  }
  /// Keeps a search's verdict and timings (search_log()).
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    run_candidate(m_usable.at(chosen.index));
    m_chosen.conv.chosen_by = algorithm_choice::search;
    m_chosen.conv.searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
  }
  /// Runs candidate `index` of the shared set without searching (a layer of a shape already
  /// searched, `searched_seconds` its search's time): the caller verifies.
  void use(std::size_t index, double searched_seconds) {
    if (index >= m_set->size()) throw invalid_argument(std::string(m_kind) + "::use: no candidate " + std::to_string(index));
    run_candidate(index);
    m_chosen.conv.chosen_by = algorithm_choice::search;
    m_chosen.conv.searched_seconds = searched_seconds;
  }
  /// Whether candidate `index` of the shared set is one this layer's search would consider (its
  /// workspace fits; a quantized layer's tensors suit it): what use() should be given.
  bool can_run(std::size_t index) const noexcept {
    return std::find(m_usable.begin(), m_usable.end(), index) != m_usable.end();
  }
  /// Every timing of its search (empty until a search ran; a layer that reused another's
  /// choice has none).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }
  /// The chosen candidate's index in the shared set.
  std::size_t chosen_index() const noexcept { return m_current; }
  /// What it runs.
  const fused_conv_algorithm& algorithm() const noexcept { return m_chosen; }
  /// The shared candidate set.
  const Set& candidates() const noexcept { return *m_set; }
  /// Workspace bytes the chosen candidate needs.
  std::size_t workspace_needed() const noexcept { return m_set->info(m_current).conv.workspace; }
  /// Moves the layer to its own workspace of `bytes` (at least workspace_needed()), then
  /// `guard` bytes of guard band. Some engines keep counters in their workspace between calls
  /// (cuDNN's engines 39 and 41; they reset them on exit), so a network gives each layer a
  /// private, zeroed one after the search instead of one buffer shared with other engines.
  void rebind_workspace(void* workspace, std::size_t bytes, std::size_t guard = 0) {
    if (bytes < workspace_needed()) {
      throw invalid_argument(std::string(m_kind) + "::rebind_workspace: " + std::to_string(bytes) +
                             " bytes, the candidate needs " + std::to_string(workspace_needed()));
    }
    m_workspace = workspace;
    m_workspace_bytes = bytes;
    m_workspace_guard = guard;
  }

 protected:
  /// `kind` names the layer's class in messages.
  conv_layer_search(std::shared_ptr<const Set> set, void* workspace, std::size_t workspace_bytes, std::size_t workspace_guard,
                    const char* kind)
      : m_set(std::move(set)), m_workspace(workspace), m_workspace_bytes(workspace_bytes), m_workspace_guard(workspace_guard),
        m_kind(kind) {}
  /// Runs candidate `index` of the shared set from now on.
  void run_candidate(std::size_t index) {
    m_current = index;
    m_chosen = m_set->info(index);
  }

  std::shared_ptr<const Set> m_set;
  void* m_workspace;
  std::size_t m_workspace_bytes;
  std::size_t m_workspace_guard;      // guard band bytes after the workspace
  std::vector<std::size_t> m_usable;  // the shared set's candidates this layer can run
  std::size_t m_current = 0;
  fused_conv_algorithm m_chosen;
  std::vector<candidate_time> m_search_log;

 private:
  const char* m_kind;
};

/// One zeroed buffer holding a private workspace for each of `needs` bytes, each followed by
/// `guard` bytes of guard band and starting 256-byte aligned: what a network gives its
/// convolutions after the search, since cuDNN's engines 39 and 41 keep a few bytes of state in
/// their workspace between calls, which any other layer sharing the buffer could overwrite.
struct private_workspaces {
  device_buffer<unsigned char> buffer;
  std::vector<unsigned char*> at;  ///< workspace i's start
};

/// Carves private_workspaces for `needs`, zeroed on `stream`.
inline private_workspaces carve_private_workspaces(const std::vector<std::size_t>& needs, std::size_t guard,
                                                   cudaStream_t stream) {
  auto region = [&](std::size_t need) { return (need + guard + 255) / 256 * 256; };
  std::size_t total = 0;
  for (std::size_t need : needs) total += region(need);
  private_workspaces w{device_buffer<unsigned char>(total, initial_fill::uninitialized()), {}};
  GPUCMP_CUDA_CHECK(cudaMemsetAsync(w.buffer.data(), 0, total, stream));
  std::size_t offset = 0;
  for (std::size_t need : needs) {
    w.at.push_back(w.buffer.data() + offset);
    offset += region(need);
  }
  return w;
}

/// One fused convolution layer bound to its tensors: runs the candidate its search chose.
/// Searchable through ops/operation.hpp's search(); the network answers support and memory
/// for it (its memory plan).
class fused_conv : public conv_layer_search<fused_conv_candidates> {
 public:
  /// Binds `tensors` and a workspace of `workspace_bytes` to a shared candidate set; the
  /// search considers only candidates whose workspace fits.
  fused_conv(std::shared_ptr<const fused_conv_candidates> candidates, const fused_conv_tensors& tensors, void* workspace,
             std::size_t workspace_bytes, std::size_t workspace_guard = 0)
      : conv_layer_search(std::move(candidates), workspace, workspace_bytes, workspace_guard, "fused_conv"),
        m_tensors(tensors), m_pack(fused_conv_candidates::make_pack(tensors)) {
    for (std::size_t i = 0; i < m_set->size(); ++i) {
      if (m_set->info(i).conv.workspace <= m_workspace_bytes) m_usable.push_back(i);
    }
    if (!m_usable.empty()) m_current = m_usable[0];
    if (m_set->size() > 0) m_chosen = m_set->info(m_current);
  }

  /// Enqueues the layer on `stream`.
  void operator()(cudaStream_t stream) const {
    m_set->launch(m_current, m_tensors, m_pack, m_workspace, m_workspace_bytes, stream);
  }

  /// "fused conv " and the candidate set's name.
  std::string name() const { return "fused conv " + m_set->name(); }
  /// Search candidate `i`'s cuDNN API: the search re-times the fastest of each
  /// (search_options::refine_group_margin).
  int candidate_group(std::size_t i) const { return int(m_set->info(m_usable.at(i)).conv.api); }

  /// Poisons y, runs the layer and compares y with a double reference at 16,384 random
  /// outputs (first and last included), or at every output of a small layer.
  /// With guard bands (fused_conv_tensors::y_guard, the workspace's), a run that writes past
  /// the end of y or of its workspace fails too: a reference comparison cannot see that.
  verification verify(cudaStream_t stream) const {
    const conv_problem& p = m_set->problem();
    const std::size_t y_bytes = std::size_t(p.y_elements()) * activation_bytes(p.dtype);
    unsigned char* y_end = static_cast<unsigned char*>(m_tensors.y) + y_bytes;
    unsigned char* ws_end = static_cast<unsigned char*>(m_workspace) + workspace_needed();
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_tensors.y, 0xFF, y_bytes, stream));
    fill_guard(y_end, m_tensors.y_guard, stream);
    if (m_workspace != nullptr) fill_guard(ws_end, m_workspace_guard, stream);
    (*this)(stream);
    verification v;
    v = visit_floating_storage(types_of(p.dtype).output, [&](auto zero) { return compare<decltype(zero)>(stream); });
    add_guard_checks(v,
                     {{y_end, m_tensors.y_guard, "its output"},
                      {ws_end, m_workspace != nullptr ? m_workspace_guard : 0, "its workspace"}},
                     stream);
    return v;
  }

  /// Like verify(), but every output is checked, on the GPU (verify() samples 16,384 of a
  /// large layer's outputs). Slower; for diagnostics and for tests.
  verification verify_every_output(cudaStream_t stream) const {
    const conv_problem& p = m_set->problem();
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_tensors.y, 0xFF, std::size_t(p.y_elements()) * activation_bytes(p.dtype), stream));
    (*this)(stream);
    return visit_floating_storage(types_of(p.dtype).output, [&](auto zero) { return check_all<decltype(zero)>(stream); });
  }

 private:
  template <class T>
  verification check_all(cudaStream_t stream) const {
    const conv_problem& p = m_set->problem();
    const detail::conv_geometry g = detail::conv_geometry_of(p);
    device_buffer<unsigned long long> counters(3, initial_fill::uninitialized());
    counters.copy_from_host({0ull, 0ull, 0ull});
    const tolerance tol = conv_tolerance(p.dtype, detail::is_transform_algorithm(m_chosen.conv));
    detail::fused_conv_check_all_kernel<T><<<132 * 16, 256, 0, stream>>>(
        g, static_cast<const T*>(m_tensors.x), static_cast<const T*>(m_tensors.w), static_cast<const T*>(m_tensors.bias),
        m_set->epilogue().residual ? static_cast<const T*>(m_tensors.residual) : nullptr, static_cast<const T*>(m_tensors.y),
        m_set->epilogue().relu, tol, p.reduction_length(conv_direction::forward), counters.data(), counters.data() + 1,
        counters.data() + 2);
    GPUCMP_CUDA_CHECK_LAST("fused_conv_check_all_kernel");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<unsigned long long> c = counters.to_host();
    verification v;
    v.method = std::string("FP64 GPU reference of conv + ") + to_string(m_set->epilogue()) + ", every output, compared on the GPU";
    v.checked = std::size_t(p.y_elements());
    v.failed = std::size_t(c[0]);
    double worst = 0;
    std::memcpy(&worst, &c[1], sizeof worst);
    v.worst_ratio = worst;
    v.worst_where = "output " + std::to_string(c[2]) + " (NKPQ order)";
    return v;
  }

  template <class T>
  verification compare(cudaStream_t stream) const {
    const conv_problem& p = m_set->problem();
    const detail::conv_geometry g = detail::conv_geometry_of(p);
    const std::int64_t outputs = std::int64_t(p.y_elements());
    const std::vector<std::int64_t> picked = detail::checked_outputs(outputs, 91);
    const std::size_t count = picked.size();
    device_buffer<std::int64_t> picked_d(count, initial_fill::uninitialized());
    picked_d.copy_from_host(picked);
    device_buffer<double> ref_d(count, initial_fill::poison()), conv_d(count, initial_fill::poison()),
        l2_d(count, initial_fill::poison()), got_d(count, initial_fill::poison());
    const unsigned threads = 256;
    detail::fused_conv_reference_kernel<T><<<unsigned((count * 32 + threads - 1) / threads), threads, 0, stream>>>(
        g, static_cast<const T*>(m_tensors.x), static_cast<const T*>(m_tensors.w), static_cast<const T*>(m_tensors.bias),
        m_set->epilogue().residual ? static_cast<const T*>(m_tensors.residual) : nullptr, static_cast<const T*>(m_tensors.y),
        m_set->epilogue().relu, picked_d.data(), count, ref_d.data(), conv_d.data(), l2_d.data(), got_d.data());
    GPUCMP_CUDA_CHECK_LAST("fused_conv_reference_kernel");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<double> ref = ref_d.to_host(), conv_part = conv_d.to_host(), l2 = l2_d.to_host(), got = got_d.to_host();
    verification v;
    v.method = std::string("FP64 GPU reference of conv + ") + to_string(m_set->epilogue()) +
               (count == std::size_t(outputs) ? ", every output" : ", 16384 random outputs incl. first and last");
    const tolerance tol = conv_tolerance(p.dtype, detail::is_transform_algorithm(m_chosen.conv));
    const double length = p.reduction_length(conv_direction::forward);
    for (std::size_t e = 0; e < count; ++e) {
      // The convolution's rounding, plus one more rounding of the stored result (the unfused
      // path rounds the convolution to T before the epilogue adds to it).
      const double bound = tol.bound(conv_part[e], l2[e], length) + tol.output_eps * std::fabs(ref[e]);
      const double err = std::fabs(got[e] - ref[e]);
      const bool note = !(err <= bound) || v.checked == 0 || err / bound > v.worst_ratio;
      v.add(got[e], ref[e], bound, note ? "output " + std::to_string(picked[e]) + " (NKPQ order)" : std::string());
    }
    return v;
  }

  fused_conv_tensors m_tensors;
  cudnn_variant_pack m_pack;  // its tensors by the graphs' uids
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
inline void fused_conv_candidates::describe_graph(cudnn_frontend::graph::Graph& g, bool fused) const {
  namespace fe = cudnn_frontend;
  namespace uid = detail::conv_uid;
  const conv_problem& p = m_problem;
  std::shared_ptr<fe::graph::Tensor_attributes> y = detail::add_convolution(g, p, conv_direction::forward);
  if (fused) {
    // Pointwise steps in FP32 on the convolution's FP32 result; the last one writes y.
    const std::vector<std::int64_t> dims = y->get_dim(), strides = y->get_stride();
    auto step = [&](std::shared_ptr<fe::graph::Tensor_attributes> operand, fe::PointwiseMode_t mode, const char* name) {
      auto attributes = fe::graph::Pointwise_attributes().set_name(name).set_mode(mode);
      y = operand ? g.pointwise(y, operand, attributes) : g.pointwise(y, attributes);
      y->set_dim(dims).set_stride(strides);
    };
    step(g.tensor(fe::graph::Tensor_attributes()
                      .set_name("bias")
                      .set_uid(uid::bias)
                      .set_dim({1, p.k, 1, 1})
                      .set_stride(layout_strides(p.layout, p.k, 1, 1))
                      .set_data_type(detail::frontend_data_type(detail::conv_tensor_type(p, uid::bias)))),
         fe::PointwiseMode_t::ADD, "add_bias");
    if (m_epilogue.residual) step(detail::conv_tensor(g, p, uid::residual, "z", dims), fe::PointwiseMode_t::ADD, "add_z");
    if (m_epilogue.relu) step(nullptr, fe::PointwiseMode_t::RELU_FWD, "relu");
  }
  detail::conv_output(y, p, uid::y);
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
