// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A fully connected layer for inference through cuBLASLt (component gpucmp::cublas):
// y = x W^T + b with x of N x in (the network's element type), W of out x in (row-major, as
// torch stores it), and y and b in FP32, the bias added in the GEMM's epilogue. Logits stay
// FP32 whatever the network's precision, as a classifier's last layer usually does.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {

/// The device tensors of one linear layer.
struct linear_tensors {
  const void* x = nullptr;     ///< N x in, the network's element type
  const void* w = nullptr;     ///< out x in, the network's element type
  const float* bias = nullptr; ///< out
  float* y = nullptr;          ///< N x out
};

/// One fully connected layer bound to its tensors. Searchable through ops/operation.hpp's
/// search(); the network answers support and memory for it (its memory plan).
class linear_layer {
 public:
  /// Creates the cuBLASLt descriptors for `rows` x `in` -> `out` in `dtype` (FP32 without
  /// tensor cores, TF32, FP16 or BF16 inputs; FP32 accumulate and output).
  linear_layer(cublasLtHandle_t handle, std::int64_t rows, std::int64_t in, std::int64_t out, numerics dtype,
               const linear_tensors& tensors, void* workspace, std::size_t workspace_bytes)
      : m_handle(handle), m_rows(rows), m_in(in), m_out(out), m_dtype(dtype), m_tensors(tensors), m_workspace(workspace),
        m_workspace_bytes(workspace_bytes) {
    if (rows <= 0 || in <= 0 || out <= 0) throw invalid_argument("linear_layer: rows, in and out must be positive");
    const cudaDataType_t input = element_info_of(types_of(dtype).input).cuda;
    const cublasComputeType_t compute = tf32_products(dtype) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasLtMatmulDesc_t desc = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    m_desc = desc_handle(desc);
    // Column-major view: y^T (out x N) = W (in x out, transposed) * x^T (in x N).
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    const cudaDataType_t bias_type = CUDA_R_32F;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    const float* bias = tensors.bias;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    m_a = make_layout(input, in, out, in);
    m_b = make_layout(input, in, rows, in);
    m_c = make_layout(CUDA_R_32F, out, rows, out);
    cublasLtMatmulPreference_t pref = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    pref_handle owned_pref(pref);
    const std::uint64_t ws = workspace_bytes;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    m_heuristics.resize(8);
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc, m_a.get(), m_b.get(), m_c.get(), m_c.get(), pref,
                                                                 int(m_heuristics.size()), m_heuristics.data(), &returned);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || returned == 0) {
      throw unsupported("no cuBLASLt algorithm for linear layer " + name());
    }
    GPUCMP_CUBLAS_CHECK(status);
    m_heuristics.resize(std::size_t(returned));
  }

  /// "linear/fp16/n64_in2048_out1000".
  std::string name() const {
    return std::string("linear/") + to_string(m_dtype) + "/n" + std::to_string(m_rows) + "_in" + std::to_string(m_in) +
           "_out" + std::to_string(m_out);
  }

  /// Enqueues the layer on `stream`.
  void operator()(cudaStream_t stream) const {
    const float one = 1.0f, zero = 0.0f;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmul(m_handle, m_desc.get(), &one, m_tensors.w, m_a.get(), m_tensors.x, m_b.get(), &zero,
                                       m_tensors.y, m_c.get(), m_tensors.y, m_c.get(), &m_heuristics[m_current].algo,
                                       m_workspace, m_workspace_bytes, stream));
  }

  /// How many of the heuristic's candidates a search times.
  std::size_t candidate_count() const noexcept { return m_heuristics.size(); }
  /// "cuBLASLt heuristic rank 2".
  std::string describe_candidate(std::size_t i) const { return "cuBLASLt heuristic rank " + std::to_string(i); }
  /// Runs candidate `i` from now on, on a workspace zeroed on `stream` (no candidate sees
  /// another's leftovers).
  void select(std::size_t i, cudaStream_t stream) {
    if (i >= m_heuristics.size()) throw invalid_argument("linear_layer::select: no candidate " + std::to_string(i));
    m_current = i;
    zero_workspace(stream);
  }
  /// Keeps a search's verdict and timings (search_log()).
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    m_current = chosen.index;
    m_searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
  }
  /// Every timing of its search (empty until a search ran).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }

  /// Poisons y, runs the layer, and compares 16 rows (first and last included; every row of
  /// a small batch) with an FP64 reference on the host.
  verification verify(cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_tensors.y, 0xFF, std::size_t(m_rows * m_out) * sizeof(float), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return visit_floating_storage(types_of(m_dtype).output, [&](auto zero) { return compare<decltype(zero)>(); });
  }

  /// "cuBLASLt heuristic rank 2 (search)" and its searched time.
  std::string describe() const {
    return "cuBLASLt heuristic rank " + std::to_string(m_current) + (m_searched_seconds > 0 ? " (search)" : " (heuristic)");
  }
  /// Median seconds per call found by the search (0 without one).
  double searched_seconds() const noexcept { return m_searched_seconds; }

 private:
  using layout_handle = detail::unique_handle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
  using desc_handle = detail::unique_handle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
  using pref_handle = detail::unique_handle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

  void zero_workspace(cudaStream_t stream) const {
    if (m_workspace_bytes != 0) GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_workspace, 0, m_workspace_bytes, stream));
  }

  static layout_handle make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    cublasLtMatrixLayout_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, std::uint64_t(rows), std::uint64_t(cols), ld));
    return layout_handle(raw);
  }

  template <class T>
  verification compare() const {
    std::set<std::int64_t> rows{0, m_rows - 1};
    for (std::uint64_t t = 0; rows.size() < std::size_t(std::min<std::int64_t>(16, m_rows)); ++t) {
      rows.insert(std::int64_t(random_bits(53, t) % std::uint64_t(m_rows)));
    }
    std::vector<T> x(std::size_t(m_rows * m_in)), w(std::size_t(m_out * m_in));
    std::vector<float> bias(static_cast<std::size_t>(m_out)), y(static_cast<std::size_t>(m_rows * m_out));
    GPUCMP_CUDA_CHECK(cudaMemcpy(x.data(), m_tensors.x, x.size() * sizeof(T), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(w.data(), m_tensors.w, w.size() * sizeof(T), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(bias.data(), m_tensors.bias, bias.size() * sizeof(float), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(y.data(), m_tensors.y, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    verification v;
    v.method = "FP64 CPU reference, " + std::to_string(rows.size()) + " rows incl. first and last, every column";
    tolerance tol;
    tol.output_eps = 0x1p-24;
    tol.accumulate_eps = 0x1p-24;
    tol.input_eps = m_dtype == numerics::tf32 ? 0x1p-10 : 0.0;  // TF32 rounds each product's inputs
    for (std::int64_t r : rows) {
      for (std::int64_t o = 0; o < m_out; ++o) {
        double sum = 0, squares = 0;
        for (std::int64_t i = 0; i < m_in; ++i) {
          const double p = to_double(x[std::size_t(r * m_in + i)]) * to_double(w[std::size_t(o * m_in + i)]);
          sum += p;
          squares += p * p;
        }
        const double ref = sum + double(bias[std::size_t(o)]);
        const double bound = tol.bound(ref, std::sqrt(squares), double(m_in));
        v.add(double(y[std::size_t(r * m_out + o)]), ref, bound,
              "row " + std::to_string(r) + ", column " + std::to_string(o));
      }
    }
    return v;
  }

  cublasLtHandle_t m_handle;
  std::int64_t m_rows, m_in, m_out;
  numerics m_dtype;
  linear_tensors m_tensors;
  void* m_workspace;
  std::size_t m_workspace_bytes;
  desc_handle m_desc;
  layout_handle m_a, m_b, m_c;
  std::vector<cublasLtMatmulHeuristicResult_t> m_heuristics;
  std::size_t m_current = 0;
  double m_searched_seconds = 0;
  std::vector<candidate_time> m_search_log;
};

}  // namespace gpucmp
