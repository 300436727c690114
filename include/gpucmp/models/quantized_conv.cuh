// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A quantized convolution layer for inference (component gpucmp::cudnn): x, w, y and a
// residual z stored in FP8 E4M3 or INT8, NHWC; products summed in FP32 (FP8) or INT32 (INT8);
// the epilogue in FP32:
//   y = quantize(act(sum * dequantize[k] + bias[k] (+ z * z_scale)) * output_scale)
// dequantize[k] is x's scale times output channel k's weight scale: per-channel weight scales
// cost nothing, as each output channel's sum is scaled once after it is complete. The bias
// (batch norm folded in) is in real units, output_scale is 1 / (y's scale), and quantize
// rounds to nearest and saturates (FP8 E4M3 at +-448, INT8 at -128..127). The scales live on
// the device, so a recalibrated network changes numbers, not graphs.
//
// Four ways to run it compete in a timed search, and the fastest that verifies is kept:
//  - one cuDNN graph conv -> scale -> add bias -> (scale z, add) -> (ReLU) -> scale, writing
//    the stored type (cudnn-frontend's FP8 and INT8 forward patterns), on whichever plans
//    cuDNN's heuristics offer;
//  - a plain cuDNN convolution writing its FP32 or INT32 sums to scratch, then gpucmp's
//    epilogue kernel (only where the layer is given that scratch);
//  - a 1x1 INT8 layer as one cuBLASLt matmul with the whole epilogue in its kernel
//    (models/matmul_conv.cuh; only given a cuBLASLt handle and the pre-multiplied scales);
//  - gpucmp's own tensor-core kernel, an implicit GEMM with the epilogue in it
//    (models/quantized_conv_kernel.cuh), in each of its tiles.
// A layer run none of these ways is unsupported here; a network runs it in FP16 instead.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/fused_conv.cuh>
#include <gpucmp/models/guard_band.cuh>
#include <gpucmp/models/matmul_conv.cuh>
#include <gpucmp/models/quantized_conv_kernel.cuh>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/conv_graph.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/verification.hpp>

#include <cudnn.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes a quantized convolution takes: FP8 E4M3 (FP32 sums) and INT8 (INT32 sums).
inline constexpr numerics quantized_conv_numerics[] = {numerics::fp8_e4m3, numerics::int8};

/// What x, w, y and z of a quantized layer of recipe `t` are stored in.
constexpr element_type quantized_storage(numerics t) noexcept { return types_of(t).input; }

/// The device tensors one quantized layer reads and writes, NHWC (filters K x R x S x C).
struct quantized_conv_tensors {
  const void* x = nullptr;                  ///< input, stored type
  const void* w = nullptr;                  ///< filters, stored type
  const float* bias = nullptr;              ///< K, real units
  const void* residual = nullptr;           ///< z, y's shape, stored type (with epilogue.residual)
  void* y = nullptr;                        ///< output, N x P x Q x K, stored type
  const float* dequantize = nullptr;        ///< K: x's scale times channel k's weight scale
  const float* residual_scale = nullptr;    ///< 1: z's scale (with epilogue.residual)
  const float* output_scale = nullptr;      ///< 1: 1 / (y's scale)
  /// N x P x Q x K FP32 (FP8) or INT32 (INT8) scratch for the unfused path; null leaves that
  /// path out of the search.
  void* accumulator = nullptr;
  /// The matmul path's scales, pre-multiplied as its epilogue applies them (matmul_conv.cuh):
  /// K floats dequantize[k] x output_scale and K floats bias[k] x output_scale on the device,
  /// and z's scale x output_scale on the host. Null leaves that path out of the search.
  const float* matmul_alpha = nullptr;
  const float* matmul_bias = nullptr;  ///< see matmul_alpha
  float matmul_beta = 0;               ///< see matmul_alpha
  /// Bytes after y that belong to no tensor (0: none): verify() fills them with guard_pattern
  /// before the run and fails when the run changed them.
  std::size_t y_guard = 0;
};

namespace detail {

// The unfused path's epilogue: y = quantize(act(sum * dequantize[k] + bias[k] (+ z * z_scale))
// * output_scale), NHWC (element i is of channel i % k).
template <class Stored, class Sum>
__global__ void quantized_epilogue_kernel(const Sum* sums, const float* dequantize, const float* bias, const Stored* z,
                                          const float* z_scale, const float* output_scale, Stored* y, std::int64_t count,
                                          std::int64_t k, bool relu) {
  const float zs = z != nullptr ? *z_scale : 0.0f, out_scale = *output_scale;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t c = i % k;
    float v = float(sums[i]) * dequantize[c] + bias[c];
    if (z != nullptr) v += float(to_double(z[i])) * zs;
    if (relu) v = fmaxf(v, 0.0f);
    y[i] = quantize_saturated<Stored>(v * out_scale);
  }
}

// One warp per checked output: the exact sum of the stored products (double), then the
// epilogue in double, in the output's stored units and clamped to the format's range as
// quantize_saturated clamps. Also the pieces its bound needs, in the same units: the root of
// the sum of squared products and the magnitude of the epilogue's terms.
template <class Stored>
__global__ void quantized_conv_reference_kernel(conv_geometry g, const Stored* x, const Stored* w, quantized_conv_tensors t,
                                                bool relu, double lowest, double highest, const std::int64_t* outputs,
                                                std::size_t count, double* reference, double* l2, double* magnitude,
                                                double* got) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (warp >= count) return;
  double sum = 0, squares = 0;
  conv_reference_terms(conv_direction::forward, g, x, w, x, outputs[warp], lane, 32, sum, squares);
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
    squares += __shfl_down_sync(0xffffffffu, squares, offset);
  }
  if (lane != 0) return;
  const std::int64_t out = outputs[warp];
  const std::int64_t ki = (out / (g.q * g.p)) % g.k;
  const std::int64_t at = conv_output_offset(conv_direction::forward, g, out);
  const double dq = t.dequantize[ki], out_scale = *t.output_scale, b = t.bias[ki];
  const double z = t.residual != nullptr ? to_double(static_cast<const Stored*>(t.residual)[at]) * *t.residual_scale : 0.0;
  double v = sum * dq + b + z;
  if (relu) v = v > 0 ? v : 0.0;
  reference[warp] = fmin(fmax(v * out_scale, lowest), highest);
  l2[warp] = sqrt(squares) * fabs(dq) * out_scale;
  magnitude[warp] = (fabs(sum * dq) + fabs(b) + fabs(z) + fabs(v)) * out_scale;
  got[warp] = to_double(static_cast<const Stored*>(t.y)[at]);
}

}  // namespace detail

/// Random operands of one quantized layer, for tests and benchmarks of a layer alone: x, w and
/// z uniform over the stored format (INT8 -127..127, FP8 E4M3 |v| < 4), never all zero;
/// per-channel dequantize scales spread over a factor of 4 around what makes the sums' real
/// values of spread ~1; biases in -0.5..0.5; z's real spread ~0.6; and an output scale that
/// puts a real value of 8 x `headroom` at the format's top (headroom < 1: some outputs
/// saturate). Filled on `stream`.
struct quantized_conv_operands {
  device_buffer<unsigned char> x, w, z, y, sums;
  device_buffer<float> bias, dequantize, z_scale, output_scale;
  device_buffer<float> matmul_alpha, matmul_bias;  ///< the matmul path's scales (quantized_conv_tensors)
  float matmul_beta = 0;                           ///< see matmul_alpha

  quantized_conv_operands(const conv_problem& p, double headroom, std::uint64_t seed, cudaStream_t stream)
      : x(stored_bytes(p, p.x_elements())), w(stored_bytes(p, p.w_elements())), z(stored_bytes(p, p.y_elements())),
        y(stored_bytes(p, p.y_elements())),
        sums(std::size_t(p.y_elements()) * element_bytes(types_of(p.dtype).accumulate), initial_fill::uninitialized()),
        bias(std::size_t(p.k)), dequantize(std::size_t(p.k)), z_scale(1), output_scale(1), matmul_alpha(std::size_t(p.k)),
        matmul_bias(std::size_t(p.k)) {
    require_numerics(p.dtype, quantized_conv_numerics, "quantized_conv_operands");
    const bool int8 = p.dtype == numerics::int8;
    const double range = int8 ? 127 : 4;
    for (auto* buf : {&x, &w, &z}) {
      if (int8) {
        fill_uniform(reinterpret_cast<std::int8_t*>(buf->data()), buf->bytes(), seed++, -range, range, stream);
      } else {
        fill_uniform(reinterpret_cast<__nv_fp8_e4m3*>(buf->data()), buf->bytes(), seed++, -range, range, stream);
      }
    }
    // A sum of C R S products of uniform values has a spread of sqrt(C R S) range^2 / 3.
    const double spread = std::sqrt(p.reduction_length(conv_direction::forward)) * range * range / 3;
    std::vector<float> dq(std::size_t(p.k)), b(std::size_t(p.k));
    for (std::int64_t k = 0; k < p.k; ++k) {
      dq[std::size_t(k)] = float((1.0 + 3.0 * double(k % 7) / 6) / spread);
      b[std::size_t(k)] = float(0.25 * double(k % 5) - 0.5);
    }
    dequantize.copy_from_host(dq);
    bias.copy_from_host(b);
    const float zs = float(1.0 / range), out = float(element_info_of(quantized_storage(p.dtype)).largest / (8.0 * headroom));
    z_scale.copy_from_host(std::vector<float>{zs});
    output_scale.copy_from_host(std::vector<float>{out});
    for (std::size_t k = 0; k < dq.size(); ++k) {
      dq[k] *= out;
      b[k] *= out;
    }
    matmul_alpha.copy_from_host(dq);
    matmul_bias.copy_from_host(b);
    matmul_beta = zs * out;
  }

  /// The layer's tensors (z with `residual`, the unfused path's scratch with `with_sums`).
  quantized_conv_tensors tensors(bool residual, bool with_sums = true) {
    quantized_conv_tensors t;
    t.x = x.data();
    t.w = w.data();
    t.bias = bias.data();
    t.residual = residual ? z.data() : nullptr;
    t.y = y.data();
    t.dequantize = dequantize.data();
    t.residual_scale = z_scale.data();
    t.output_scale = output_scale.data();
    t.accumulator = with_sums ? sums.data() : nullptr;
    t.matmul_alpha = matmul_alpha.data();
    t.matmul_bias = matmul_bias.data();
    t.matmul_beta = residual ? matmul_beta : 0.0f;
    return t;
  }

 private:
  static std::size_t stored_bytes(const conv_problem& p, double elements) {
    return std::size_t(elements) * element_bytes(quantized_storage(p.dtype));
  }
};

/// The libraries a quantized layer runs on: cuDNN, and cuBLASLt for the matmul path (null
/// leaves that path out).
struct quantized_conv_libraries {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
};

/// Every way a quantized layer runs, in the order candidates are listed.
inline std::vector<fusion_path> quantized_fusion_paths() {
  return {fusion_path::fused_graph, fusion_path::conv_then_kernel, fusion_path::cublaslt_matmul,
          fusion_path::gpucmp_implicit_gemm};
}

/// One layer's tensors as each path takes them: the cuDNN graphs' variant pack, the matmul's
/// descriptor (null without that path), and whether they suit gpucmp's kernel's 16-byte rows.
struct quantized_conv_binding {
  cudnn_variant_pack pack;
  std::shared_ptr<const matmul_conv_candidates::binding> matmul;
  bool kernel_aligned = false;
};

/// Every way to run one quantized (shape, epilogue): the fused graph's plans, the plain
/// convolution's (each followed by gpucmp's epilogue kernel), for 1x1 INT8 layers cuBLASLt's
/// matmuls, and the tiles of gpucmp's own kernel. Shared by the layers of that shape; the
/// algorithms are described as a fused layer's (fused_conv_algorithm).
class quantized_conv_candidates {
 public:
  /// Checks the problem (one of quantized_conv_numerics, NHWC; invalid_argument or unsupported
  /// naming what is wrong), then builds the graphs and enumerates candidates: at most
  /// `max_per_path` of each path, none needing more than `workspace_limit` bytes. Throws
  /// unsupported, with each path's reason, when it runs no way.
  quantized_conv_candidates(quantized_conv_libraries libraries, const conv_problem& problem, const conv_epilogue& epilogue,
                            int max_per_path, std::size_t workspace_limit,
                            const std::vector<fusion_path>& paths = quantized_fusion_paths())
      : m_handle(libraries.cudnn), m_problem(problem), m_epilogue(epilogue) {
    require_numerics(problem.dtype, quantized_conv_numerics, "a quantized convolution");
    if (problem.layout != conv_layout::nhwc) {
      throw invalid_argument("quantized conv: layout " + std::string(to_string(problem.layout)) +
                             "; FP8 and INT8 convolutions run NHWC");
    }
    m_problem.validate_geometry();
    const std::size_t cap = std::size_t(std::max(1, max_per_path));
    std::string refused;
    for (fusion_path path : paths) {
      if (path == fusion_path::legacy_fused) {
        throw invalid_argument("quantized conv: the legacy fused call takes no per-channel scales; paths are fused_graph, "
                               "conv_then_kernel, cublaslt_matmul and gpucmp_implicit_gemm");
      }
      if (path == fusion_path::cublaslt_matmul) {
        add_matmul_candidates(libraries.cublaslt, cap, workspace_limit, refused);
        continue;
      }
      if (path == fusion_path::gpucmp_implicit_gemm) {
        add_kernel_candidates(refused);
        continue;
      }
      const bool fused = path == fusion_path::fused_graph;
      try {
        auto graph = std::make_shared<const cudnn_graph>(
            m_handle, [&](cudnn_frontend::graph::Graph& g) { describe_graph(g, fused); }, cudnn_numerics{true, true},
            workspace_limit, cap, "quantized conv " + name() + (fused ? " (fused)" : " (plain)"));
        for (std::size_t i = 0; i < graph->size(); ++i) m_all.push_back(candidate_of(graph->plan(i), path, i));
        (fused ? m_fused_graph : m_plain_graph) = std::move(graph);
      } catch (const unsupported& e) {
        refused += std::string(refused.empty() ? "" : "; ") + e.what();
      }
    }
    if (m_all.empty()) throw unsupported("nothing runs quantized conv " + name() + ": " + refused);
  }
  /// The same on cuDNN alone (no matmul path).
  quantized_conv_candidates(cudnnHandle_t handle, const conv_problem& problem, const conv_epilogue& epilogue, int max_per_path,
                            std::size_t workspace_limit,
                            const std::vector<fusion_path>& paths = {fusion_path::fused_graph, fusion_path::conv_then_kernel})
      : quantized_conv_candidates(quantized_conv_libraries{handle, nullptr}, problem, epilogue, max_per_path, workspace_limit,
                                  paths) {}
  quantized_conv_candidates(const quantized_conv_candidates&) = delete;
  quantized_conv_candidates& operator=(const quantized_conv_candidates&) = delete;

  /// "int8_nhwc/n32_c64_h56_w56_k64_r3_s3_p1_u1/bias+relu".
  std::string name() const {
    return conv_layer_name(m_problem, m_epilogue);
  }
  /// The shape and recipe.
  const conv_problem& problem() const noexcept { return m_problem; }
  /// The epilogue.
  const conv_epilogue& epilogue() const noexcept { return m_epilogue; }
  /// How many candidates there are.
  std::size_t size() const noexcept { return m_all.size(); }
  /// Candidate `i`'s description.
  const fused_conv_algorithm& info(std::size_t i) const { return m_all.at(i).info; }
  /// Bytes of the unfused path's scratch (quantized_conv_tensors::accumulator).
  std::size_t accumulator_bytes() const noexcept {
    return std::size_t(m_problem.y_elements()) * element_bytes(types_of(m_problem.dtype).accumulate);
  }

  /// One layer's tensors as each path takes them (the matmul's descriptor where the layer has
  /// the matmul path's scales).
  quantized_conv_binding bind(const quantized_conv_tensors& t) const {
    quantized_conv_binding b;
    b.pack = make_pack(t);
    if (m_matmul && t.matmul_alpha != nullptr && t.matmul_bias != nullptr) b.matmul = m_matmul->bind(t.matmul_bias);
    b.kernel_aligned = quantized_conv_kernels::aligned(kernel_operands(t));
    return b;
  }

  /// Whether candidate `i` runs with layer binding `b`: a matmul needs the matmul's scales, and
  /// cuBLASLt's check of the layer's descriptor; gpucmp's kernel 16-byte aligned tensors.
  bool runs_with(std::size_t i, const quantized_conv_binding& b) const {
    const candidate& c = m_all.at(i);
    if (c.info.path == fusion_path::gpucmp_implicit_gemm) return b.kernel_aligned;
    if (c.info.path != fusion_path::cublaslt_matmul) return true;
    return b.matmul && b.matmul->accepted.at(c.plan);
  }

  /// One layer's tensors bound by the graphs' uids.
  static cudnn_variant_pack make_pack(const quantized_conv_tensors& t) {
    namespace uid = detail::conv_uid;
    return {{uid::x, const_cast<void*>(t.x)},
            {uid::w, const_cast<void*>(t.w)},
            {uid::y, t.y},
            {uid::bias, const_cast<float*>(t.bias)},
            {uid::residual, const_cast<void*>(t.residual)},
            {uid::accumulator, t.accumulator},
            {uid::dequantize, const_cast<float*>(t.dequantize)},
            {uid::residual_scale, const_cast<float*>(t.residual_scale)},
            {uid::output_scale, const_cast<float*>(t.output_scale)}};
  }

  /// Enqueues candidate `i` on `stream` (the handle's stream is set here).
  void launch(std::size_t i, const quantized_conv_tensors& t, const quantized_conv_binding& b, void* workspace,
              cudaStream_t stream) const {
    const candidate& c = m_all.at(i);
    if (c.info.path == fusion_path::cublaslt_matmul) {
      if (!runs_with(i, b)) throw invalid_argument("quantized conv " + name() + ": the matmul path needs its scales");
      m_matmul->launch(c.plan, *b.matmul, t.x, t.w, t.residual, t.y, t.matmul_alpha, t.matmul_beta, workspace,
                       c.info.conv.workspace, stream);
      return;
    }
    if (c.info.path == fusion_path::gpucmp_implicit_gemm) {
      m_kernels->launch(c.plan, kernel_operands(t), stream);
      return;
    }
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle, stream));
    if (c.info.path == fusion_path::fused_graph) {
      m_fused_graph->execute(m_handle, c.plan, b.pack, workspace);
      return;
    }
    if (t.accumulator == nullptr) throw invalid_argument("quantized conv " + name() + ": the unfused path needs its scratch");
    m_plain_graph->execute(m_handle, c.plan, b.pack, workspace);
    const std::int64_t count = std::int64_t(m_problem.y_elements());
    const unsigned blocks = unsigned(std::min<std::int64_t>((count + 255) / 256, 132 * 16));
    const float* z_scale = m_epilogue.residual ? t.residual_scale : nullptr;
    auto run = [&](auto stored, auto sum) {
      using Stored = decltype(stored);
      using Sum = decltype(sum);
      detail::quantized_epilogue_kernel<Stored, Sum><<<blocks, 256, 0, stream>>>(
          static_cast<const Sum*>(t.accumulator), t.dequantize, t.bias,
          m_epilogue.residual ? static_cast<const Stored*>(t.residual) : nullptr, z_scale, t.output_scale,
          static_cast<Stored*>(t.y), count, m_problem.k, m_epilogue.relu);
    };
    if (m_problem.dtype == numerics::int8) {
      run(std::int8_t{}, std::int32_t{});
    } else {
      run(__nv_fp8_e4m3{}, float{});
    }
    GPUCMP_CUDA_CHECK_LAST("quantized_epilogue_kernel");
  }

 private:
  struct candidate {
    fused_conv_algorithm info;
    std::size_t plan = 0;  // its index in its path's graph
  };

  static candidate candidate_of(const cudnn_plan& p, fusion_path path, std::size_t index) {
    candidate c;
    c.info = backend_conv_algorithm(p, path);
    c.plan = index;
    return c;
  }

  // cuBLASLt's matmuls for a 1x1 INT8 layer, or the reason there are none (in `refused`).
  void add_matmul_candidates(cublasLtHandle_t handle, std::size_t cap, std::size_t workspace_limit, std::string& refused) {
    try {
      m_matmul = std::make_shared<const matmul_conv_candidates>(handle, m_problem, m_epilogue, int(cap), workspace_limit);
    } catch (const unsupported& e) {
      refused += std::string(refused.empty() ? "" : "; ") + "matmul: " + e.what();
      return;
    }
    for (std::size_t j = 0; j < m_matmul->size(); ++j) {
      const gemm_algorithm& g = m_matmul->info(j);
      candidate c;
      c.info.path = fusion_path::cublaslt_matmul;
      c.info.conv.name = g.configuration();
      c.info.conv.math = "IMMA";
      c.info.conv.workspace = g.workspace;
      c.info.conv.heuristic_rank = g.heuristic_rank;
      c.plan = j;
      m_all.push_back(c);
    }
  }

  // gpucmp's kernel's tiles, or the reason there are none (in `refused`).
  void add_kernel_candidates(std::string& refused) {
    try {
      m_kernels = std::make_shared<const quantized_conv_kernels>(m_problem, m_epilogue.relu);
    } catch (const unsupported& e) {
      refused += std::string(refused.empty() ? "" : "; ") + "gpucmp kernel: " + e.what();
      return;
    }
    for (std::size_t j = 0; j < m_kernels->size(); ++j) {
      candidate c;
      c.info.path = fusion_path::gpucmp_implicit_gemm;
      c.info.conv.name = m_kernels->describe(j);
      c.info.conv.math = m_problem.dtype == numerics::int8 ? "IMMA" : "FP8 MMA";
      c.info.conv.heuristic_rank = int(j);
      c.plan = j;
      m_all.push_back(c);
    }
  }

  // The kernel's view of a layer's tensors (z only where the epilogue adds it).
  quantized_kernel_operands kernel_operands(const quantized_conv_tensors& t) const {
    quantized_kernel_operands o;
    o.x = t.x;
    o.w = t.w;
    o.z = m_epilogue.residual ? t.residual : nullptr;
    o.y = t.y;
    o.dequantize = t.dequantize;
    o.bias = t.bias;
    o.z_scale = m_epilogue.residual ? t.residual_scale : nullptr;
    o.output_scale = t.output_scale;
    return o;
  }

  // The convolution writing its sums (fused = false), or the whole layer writing y. Defined
  // at the end of this header, in host compilation passes only (ops/cudnn_graph.hpp).
  void describe_graph(cudnn_frontend::graph::Graph& g, bool fused) const;

  cudnnHandle_t m_handle;
  conv_problem m_problem;
  conv_epilogue m_epilogue;
  std::shared_ptr<const cudnn_graph> m_fused_graph, m_plain_graph;  // null where cuDNN refused it
  std::shared_ptr<const matmul_conv_candidates> m_matmul;             // null without the matmul path
  std::shared_ptr<const quantized_conv_kernels> m_kernels;            // null without gpucmp's kernel
  std::vector<candidate> m_all;
};

/// One quantized convolution layer bound to its tensors: runs the candidate its search chose.
/// Searchable through ops/operation.hpp's search(); the network answers support and memory.
class quantized_conv : public conv_layer_search<quantized_conv_candidates> {
 public:
  /// Binds `tensors` and a workspace of `workspace_bytes` to a shared candidate set; the
  /// search considers the candidates whose workspace fits (and the unfused ones only with
  /// tensors.accumulator).
  quantized_conv(std::shared_ptr<const quantized_conv_candidates> candidates, const quantized_conv_tensors& tensors,
                 void* workspace, std::size_t workspace_bytes, std::size_t workspace_guard = 0)
      : conv_layer_search(std::move(candidates), workspace, workspace_bytes, workspace_guard, "quantized_conv"),
        m_tensors(tensors), m_binding(m_set->bind(tensors)) {
    if (m_set->epilogue().residual && (tensors.residual == nullptr || tensors.residual_scale == nullptr)) {
      throw invalid_argument("quantized conv " + m_set->name() + ": the epilogue adds z, but z or its scale is missing");
    }
    if (tensors.x == nullptr || tensors.w == nullptr || tensors.y == nullptr || tensors.bias == nullptr ||
        tensors.dequantize == nullptr || tensors.output_scale == nullptr) {
      throw invalid_argument("quantized conv " + m_set->name() + ": x, w, y, bias, dequantize and output_scale are required");
    }
    for (std::size_t i = 0; i < m_set->size(); ++i) {
      const fused_conv_algorithm& a = m_set->info(i);
      const bool scratch = a.path != fusion_path::conv_then_kernel || tensors.accumulator != nullptr;
      if (a.conv.workspace <= m_workspace_bytes && scratch && m_set->runs_with(i, m_binding)) m_usable.push_back(i);
    }
    if (m_usable.empty()) {
      throw unsupported("quantized conv " + m_set->name() + ": no candidate fits " + std::to_string(workspace_bytes) +
                        " bytes of workspace" + (tensors.accumulator ? "" : " without the unfused path's scratch") +
                        (tensors.matmul_alpha ? "" : " or the matmul path's scales") +
                        (m_binding.kernel_aligned ? "" : " or tensors 16-byte aligned for gpucmp's kernel"));
    }
    run_candidate(m_usable[0]);
  }

  /// Enqueues the layer on `stream`.
  void operator()(cudaStream_t stream) const {
    m_set->launch(m_current, m_tensors, m_binding, m_workspace, stream);
  }

  /// "quantized conv " and the candidate set's name.
  std::string name() const { return "quantized conv " + m_set->name(); }
  /// Search candidate `i`'s path: the search re-times the fastest of each
  /// (search_options::refine_group_margin).
  int candidate_group(std::size_t i) const { return int(m_set->info(m_usable.at(i)).path); }

  /// Poisons y, runs the layer and compares y with the double reference at 16,384 random
  /// outputs (first and last included), or at every output of a small layer (`every`: always).
  /// The bound of each output, in the stored units: the output's own rounding (half a unit of
  /// INT8, 2^-4 relative for FP8 E4M3 plus half its smallest subnormal), the FP32 epilogue's
  /// few roundings of its terms, and for FP8 the sum's rounding as gemm_tolerance models FP8
  /// tensor cores (about 13 bits; INT8 sums are exact). With guard bands, a run that writes past
  /// y or its workspace fails too.
  verification verify(cudaStream_t stream, bool every = false) const {
    const conv_problem& p = m_set->problem();
    const element_type stored = quantized_storage(p.dtype);
    const std::size_t y_bytes = std::size_t(p.y_elements()) * element_bytes(stored);
    unsigned char* y_end = static_cast<unsigned char*>(m_tensors.y) + y_bytes;
    unsigned char* ws_end = static_cast<unsigned char*>(m_workspace) + workspace_needed();
    // 0x7F: INT8 127, FP8 E4M3 NaN; neither is what a correct run leaves everywhere.
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_tensors.y, 0x7F, y_bytes, stream));
    fill_guard(y_end, m_tensors.y_guard, stream);
    if (m_workspace != nullptr) fill_guard(ws_end, m_workspace_guard, stream);
    (*this)(stream);
    verification v = check_output(stream, every);
    add_guard_checks(v,
                     {{y_end, m_tensors.y_guard, "its output"},
                      {ws_end, m_workspace != nullptr ? m_workspace_guard : 0, "its workspace"}},
                     stream);
    return v;
  }

  /// verify()'s comparison alone: y as the last work on `stream` left it, against the
  /// reference of the layer's tensors as they are now (a network's layer after the network
  /// ran; a test's deliberately wrong run).
  verification check_output(cudaStream_t stream, bool every = false) const {
    return m_set->problem().dtype == numerics::int8 ? compare<std::int8_t>(stream, every) : compare<__nv_fp8_e4m3>(stream, every);
  }

 private:
  template <class Stored>
  verification compare(cudaStream_t stream, bool every) const {
    const conv_problem& p = m_set->problem();
    const detail::conv_geometry g = detail::conv_geometry_of(p);
    const std::vector<std::int64_t> picked = detail::checked_outputs(std::int64_t(p.y_elements()), 93, every);
    const std::size_t count = picked.size();
    device_buffer<std::int64_t> picked_d(count, initial_fill::uninitialized());
    picked_d.copy_from_host(picked);
    device_buffer<double> ref_d(count, initial_fill::poison()), l2_d(count, initial_fill::poison()),
        magnitude_d(count, initial_fill::poison()), got_d(count, initial_fill::poison());
    const element_info& format = element_info_of(quantized_storage(p.dtype));
    const bool integer = !format.floating;
    quantized_conv_tensors t = m_tensors;
    if (!m_set->epilogue().residual) t.residual = nullptr;
    const unsigned threads = 256;
    detail::quantized_conv_reference_kernel<Stored><<<unsigned((count * 32 + threads - 1) / threads), threads, 0, stream>>>(
        g, static_cast<const Stored*>(t.x), static_cast<const Stored*>(t.w), t, m_set->epilogue().relu,
        integer ? -format.largest - 1 : -format.largest, format.largest, picked_d.data(), count, ref_d.data(), l2_d.data(),
        magnitude_d.data(), got_d.data());
    GPUCMP_CUDA_CHECK_LAST("quantized_conv_reference_kernel");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<double> ref = ref_d.to_host(), l2 = l2_d.to_host(), magnitude = magnitude_d.to_host(),
                              got = got_d.to_host();
    verification v;
    v.method = std::string("FP64 GPU reference of ") + to_string(p.dtype) + " conv + scales + " + to_string(m_set->epilogue()) +
               (count == std::size_t(p.y_elements()) ? ", every output" : ", 16384 random outputs incl. first and last");
    // Hopper's FP8 tensor cores add with about 13 bits, not FP32's 24, as gemm_tolerance
    // models them (cuDNN's FP8 engines measured so on an H100: errors of ~2^-12 of the outputs'
    // spread, 1,000 times FP32's); INT32 sums are exact.
    const tolerance sum_rounding = gemm_tolerance(p.dtype);
    const double length = p.reduction_length(conv_direction::forward);
    const double epilogue_rounding = 8 * std::ldexp(1.0, -24);  // a few FP32 operations, and the sum's conversion
    for (std::size_t e = 0; e < count; ++e) {
      const double own = integer ? 0.5 : unit_roundoff(format.type) * std::fabs(ref[e]) + format.smallest_subnormal / 2;
      const double sums = sum_rounding.sigmas * sum_rounding.accumulate_eps * std::sqrt(length) * l2[e];
      const double bound = own + epilogue_rounding * magnitude[e] + sums;
      const double err = std::fabs(got[e] - ref[e]);
      const bool note = !(err <= bound) || v.checked == 0 || err / bound > v.worst_ratio;
      v.add(got[e], ref[e], bound, note ? "output " + std::to_string(picked[e]) + " (NKPQ order)" : std::string());
    }
    return v;
  }

  quantized_conv_tensors m_tensors;
  quantized_conv_binding m_binding;
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
inline void quantized_conv_candidates::describe_graph(cudnn_frontend::graph::Graph& g, bool fused) const {
  namespace fe = cudnn_frontend;
  namespace uid = detail::conv_uid;
  const conv_problem& p = m_problem;
  const fe::DataType_t stored = detail::frontend_data_type(quantized_storage(p.dtype));
  std::shared_ptr<fe::graph::Tensor_attributes> y = detail::add_convolution(g, p, conv_direction::forward);
  y->set_data_type(detail::frontend_data_type(types_of(p.dtype).accumulate));  // FP32 or INT32 sums
  if (!fused) {
    y->set_output(true).set_uid(uid::accumulator);
    return;
  }
  const std::vector<std::int64_t> dims = y->get_dim(), strides = y->get_stride();
  auto input = [&](std::int64_t id, const char* name, const std::vector<std::int64_t>& d, const std::vector<std::int64_t>& s,
                   fe::DataType_t type) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(id).set_dim(d).set_stride(s).set_data_type(type));
  };
  const std::vector<std::int64_t> channel_dims{1, p.k, 1, 1}, channel_strides = layout_strides(p.layout, p.k, 1, 1),
                                  scalar{1, 1, 1, 1};
  // FP32 steps on FP32 intermediates; the last writes y in the stored type.
  auto step = [&](std::shared_ptr<fe::graph::Tensor_attributes> a, std::shared_ptr<fe::graph::Tensor_attributes> b,
                  fe::PointwiseMode_t mode, const char* name) {
    auto attributes = fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    auto out = b ? g.pointwise(a, b, attributes) : g.pointwise(a, attributes);
    out->set_dim(dims).set_stride(strides).set_data_type(fe::DataType_t::FLOAT);
    return out;
  };
  y = step(y, input(uid::dequantize, "dequantize", channel_dims, channel_strides, fe::DataType_t::FLOAT),
           fe::PointwiseMode_t::MUL, "dequantize");
  y = step(y, input(uid::bias, "bias", channel_dims, channel_strides, fe::DataType_t::FLOAT), fe::PointwiseMode_t::ADD,
           "add_bias");
  if (m_epilogue.residual) {
    auto z = step(input(uid::residual, "z", dims, strides, stored),
                  input(uid::residual_scale, "z_scale", scalar, scalar, fe::DataType_t::FLOAT), fe::PointwiseMode_t::MUL,
                  "dequantize_z");
    y = step(y, z, fe::PointwiseMode_t::ADD, "add_z");
  }
  if (m_epilogue.relu) y = step(y, nullptr, fe::PointwiseMode_t::RELU_FWD, "relu");
  y = step(y, input(uid::output_scale, "output_scale", scalar, scalar, fe::DataType_t::FLOAT), fe::PointwiseMode_t::MUL,
           "quantize");
  y->set_output(true).set_uid(uid::y).set_data_type(stored);
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
