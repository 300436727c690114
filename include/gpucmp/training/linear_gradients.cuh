// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A fully connected layer's backward pass through cuBLASLt (component gpucmp::cublas), for
// models/linear.cuh's forward y = x W^T + b (x N x in and W out x in in the activations'
// type, b and y FP32):
//   dx = dy W        N x in, the activations' type (the gradient flows on through the network)
//   dW = dy^T x      out x in, FP32 (a master weight's gradient; FP32 accumulate, FP32 out)
//   db = sum_n dy    out, FP32, summed by gpucmp's kernel in a fixed order
// dy (N x out) is in the activations' type: the loss writes it so (training/loss.cuh).
// Each product runs cuBLASLt's first heuristic choice: the classifier is 0.1 % of a
// ResNet-50 step.
#pragma once

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {

/// The device tensors of a linear layer's backward pass (row-major, torch's shapes).
struct linear_gradient_tensors {
  const void* x = nullptr;   ///< N x in, the forward pass's input
  const void* w = nullptr;   ///< out x in, the weights the forward pass read
  const void* dy = nullptr;  ///< N x out, gradient of the output
  void* dx = nullptr;        ///< N x in (null: not needed, the layer reads the network's input)
  float* dw = nullptr;       ///< out x in
  float* db = nullptr;       ///< out
};

namespace detail {

// db[o] = sum over rows of dy[r, o]: one thread per output column, rows in order.
template <class T>
__global__ void bias_gradient_kernel(const T* dy, std::int64_t rows, std::int64_t out, float* db) {
  const std::int64_t o = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (o >= out) return;
  float sum = 0;
  for (std::int64_t r = 0; r < rows; ++r) sum += float(to_double(dy[r * out + o]));
  db[o] = sum;
}

// One cuBLASLt product D = op(A) op(B) in column-major terms, with its heuristic's first
// algorithm.
class lt_product {
 public:
  lt_product() = default;
  lt_product(cublasLtHandle_t handle, cublasComputeType_t compute, cublasOperation_t ta, cublasOperation_t tb, cudaDataType_t ab,
             cudaDataType_t d, std::uint64_t a_rows, std::uint64_t a_cols, std::uint64_t b_rows, std::uint64_t b_cols,
             std::uint64_t d_rows, std::uint64_t d_cols, std::size_t workspace_bytes, const std::string& what)
      : m_handle(handle) {
    cublasLtMatmulDesc_t desc = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    m_desc = desc_handle(desc);
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    m_a = make_layout(ab, a_rows, a_cols);
    m_b = make_layout(ab, b_rows, b_cols);
    m_d = make_layout(d, d_rows, d_cols);
    cublasLtMatmulPreference_t pref = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    pref_handle owned(pref);
    const std::uint64_t ws = workspace_bytes;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int returned = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, desc, m_a.get(), m_b.get(), m_d.get(), m_d.get(), pref, 1, &m_algo, &returned);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || returned == 0) throw unsupported("no cuBLASLt algorithm for " + what);
    GPUCMP_CUBLAS_CHECK(status);
  }

  /// D = op(A) op(B), plus C when `c` is not null (C has D's type and shape; c == d accumulates).
  void operator()(const void* a, const void* b, void* d, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                  const void* c = nullptr) const {
    const float one = 1.0f, zero = 0.0f;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmul(m_handle, m_desc.get(), &one, a, m_a.get(), b, m_b.get(), c != nullptr ? &one : &zero,
                                       c != nullptr ? c : d, m_d.get(), d, m_d.get(), &m_algo.algo, workspace, workspace_bytes, stream));
  }

 private:
  using layout_handle = unique_handle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
  using desc_handle = unique_handle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
  using pref_handle = unique_handle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

  static layout_handle make_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols) {
    cublasLtMatrixLayout_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, std::int64_t(rows)));
    return layout_handle(raw);
  }

  cublasLtHandle_t m_handle = nullptr;
  desc_handle m_desc;
  layout_handle m_a, m_b, m_d;
  cublasLtMatmulHeuristicResult_t m_algo{};
};

}  // namespace detail

/// One linear layer's backward pass (file comment), bound to its tensors.
class linear_backward {
 public:
  /// Prepares the products for `rows` x `in` -> `out` in `dtype` with a cuBLASLt workspace of
  /// `workspace_bytes` at `workspace`. Throws invalid_argument for bad sizes or tensors and
  /// unsupported when cuBLASLt has no algorithm.
  linear_backward(cublasLtHandle_t handle, std::int64_t rows, std::int64_t in, std::int64_t out, numerics dtype,
                  const linear_gradient_tensors& t, void* workspace, std::size_t workspace_bytes)
      : m_rows(rows), m_in(in), m_out(out), m_dtype(dtype), m_tensors(t), m_workspace(workspace), m_workspace_bytes(workspace_bytes) {
    if (rows <= 0 || in <= 0 || out <= 0) throw invalid_argument("linear_backward: rows, in and out must be positive");
    if (!t.x || !t.w || !t.dy || !t.dw || !t.db) throw invalid_argument("linear_backward " + name() + " needs x, w, dy, dw and db");
    const cudaDataType_t ab = element_info_of(types_of(dtype).output).cuda;
    const cublasComputeType_t compute = tf32_products(dtype) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const auto n = std::uint64_t(rows), i = std::uint64_t(in), o = std::uint64_t(out);
    // Column-major views: W is in x out, dy is out x N, x is in x N, dx is in x N, dW is in x out.
    // dx (in x N) = W (in x out) dy (out x N).
    if (t.dx != nullptr) {
      m_data = detail::lt_product(handle, compute, CUBLAS_OP_N, CUBLAS_OP_N, ab, ab, i, o, o, n, i, n, workspace_bytes,
                                  "the data gradient of " + name());
    }
    // dW (in x out) = x (in x N) dy^T (N x out).
    m_weight = detail::lt_product(handle, compute, CUBLAS_OP_N, CUBLAS_OP_T, ab, CUDA_R_32F, i, n, o, n, i, o, workspace_bytes,
                                  "the weight gradient of " + name());
  }

  /// "linear_backward/fp16/n64_in2048_out1000".
  std::string name() const {
    return std::string("linear_backward/") + to_string(m_dtype) + "/n" + std::to_string(m_rows) + "_in" + std::to_string(m_in) +
           "_out" + std::to_string(m_out);
  }

  /// Runs the pass on the tensors as they are (x, w and dy must hold data) and compares
  /// with an FP64 host reference: dx at 4 rows (first and last included), dW at 256 random
  /// entries, db everywhere. Synchronizes `stream`.
  verification verify(cudaStream_t stream) const {
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return visit_floating_storage(types_of(m_dtype).output, [&](auto zero) { return compare<decltype(zero)>(); });
  }

  /// Enqueues dx (when asked for), dW and db on `stream`.
  void operator()(cudaStream_t stream) const {
    if (m_tensors.dx != nullptr) m_data(m_tensors.w, m_tensors.dy, m_tensors.dx, m_workspace, m_workspace_bytes, stream);
    m_weight(m_tensors.x, m_tensors.dy, m_tensors.dw, m_workspace, m_workspace_bytes, stream);
    const unsigned blocks = unsigned((m_out + 255) / 256);
    visit_floating_storage(types_of(m_dtype).output, [&](auto zero) {
      using T = decltype(zero);
      detail::bias_gradient_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(m_tensors.dy), m_rows, m_out, m_tensors.db);
    });
    GPUCMP_CUDA_CHECK_LAST("bias_gradient_kernel");
  }

 private:
  template <class T>
  static std::vector<T> download(const void* p, std::size_t n) {
    std::vector<T> v(n);
    GPUCMP_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

  template <class T>
  verification compare() const {
    const std::size_t rows = std::size_t(m_rows), in = std::size_t(m_in), out = std::size_t(m_out);
    const std::vector<T> x = download<T>(m_tensors.x, rows * in), w = download<T>(m_tensors.w, out * in),
                         dy = download<T>(m_tensors.dy, rows * out);
    const std::vector<float> dw = download<float>(m_tensors.dw, out * in), db = download<float>(m_tensors.db, out);
    verification v;
    v.method = "FP64 CPU reference: dx at 4 rows, dW at 256 entries, db everywhere";
    const bool tf32 = tf32_products(m_dtype);
    tolerance fp32_out;
    fp32_out.output_eps = 0x1p-24;
    fp32_out.accumulate_eps = 0x1p-24;
    fp32_out.input_eps = tf32 ? 0x1p-10 : 0.0;
    tolerance typed_out = fp32_out;
    typed_out.output_eps = unit_roundoff(types_of(m_dtype).output);
    typed_out.output_abs = m_dtype == numerics::fp16 ? 0x1p-25 : 0.0;  // FP16's subnormal steps
    if (m_tensors.dx != nullptr) {
      const std::vector<T> dx = download<T>(m_tensors.dx, rows * in);
      std::set<std::size_t> picked{0, rows - 1};
      for (std::uint64_t k = 0; picked.size() < std::min<std::size_t>(4, rows); ++k) picked.insert(std::size_t(random_bits(61, k) % rows));
      for (std::size_t r : picked) {
        for (std::size_t i = 0; i < in; ++i) {
          double sum = 0, squares = 0;
          for (std::size_t o = 0; o < out; ++o) {
            const double p = to_double(dy[r * out + o]) * to_double(w[o * in + i]);
            sum += p;
            squares += p * p;
          }
          v.add(to_double(dx[r * in + i]), sum, typed_out.bound(sum, std::sqrt(squares), double(out)),
                "dx row " + std::to_string(r) + ", column " + std::to_string(i));
        }
      }
    }
    for (std::uint64_t k = 0; k < 256; ++k) {
      const std::size_t at = std::size_t(random_bits(62, k) % (out * in)), o = at / in, i = at % in;
      double sum = 0, squares = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        const double p = to_double(dy[r * out + o]) * to_double(x[r * in + i]);
        sum += p;
        squares += p * p;
      }
      v.add(dw[at], sum, fp32_out.bound(sum, std::sqrt(squares), double(rows)), "dW " + std::to_string(o) + ", " + std::to_string(i));
    }
    tolerance sum_only;
    sum_only.output_eps = 0x1p-24;
    sum_only.accumulate_eps = 0x1p-24;
    for (std::size_t o = 0; o < out; ++o) {
      double sum = 0, squares = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        sum += to_double(dy[r * out + o]);
        squares += to_double(dy[r * out + o]) * to_double(dy[r * out + o]);
      }
      v.add(db[o], sum, sum_only.bound(sum, std::sqrt(squares), double(rows)), "db " + std::to_string(o));
    }
    return v;
  }

  std::int64_t m_rows, m_in, m_out;
  numerics m_dtype;
  linear_gradient_tensors m_tensors;
  void* m_workspace;
  std::size_t m_workspace_bytes;
  detail::lt_product m_data, m_weight;
};

}  // namespace gpucmp
