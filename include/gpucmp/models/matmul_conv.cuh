// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A 1x1 INT8 convolution run as one cuBLASLt matmul (component gpucmp::cublas): one of the ways
// models/quantized_conv.cuh runs a layer. NHWC makes a 1x1, stride-1, unpadded convolution a
// GEMM with nothing moved: y (pixels x K, row-major) = x (pixels x C) w^T, w being K x C (KRSC).
// Column-major, that is D (K x pixels) = W^T X, cuBLASLt's "TN" INT8 layout. Its IMMA epilogue
// takes the layer's whole epilogue in the same kernel:
//   y = saturate(round(act(alpha[k] sum + bias'[k] + beta z)))
//   alpha[k] = dequantize[k] x output_scale, bias'[k] = bias[k] x output_scale, beta = z_scale x output_scale
// (a positive output scale commutes with ReLU): the layer's scales pre-multiplied, which the
// layer's owner provides (quantized_conv_tensors::matmul_*). alpha is a device vector; beta is
// a host value cuBLASLt reads at launch, so a captured graph keeps the beta it was captured with.
// FP8 is left out: cuBLASLt scales FP8 operands per tensor, where these layers scale weights per
// channel (on an H100 an FP8 alpha vector was NOT_SUPPORTED and outer-vector scales
// INVALID_VALUE: lab/probes/matmul_1x1_modes, docs/results/h100-quantized.md).
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/fused_conv.cuh>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cublaslt_algorithm.hpp>

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// Why `p` does not run as one matmul ("" when it does): INT8, NHWC, a 1x1 filter, stride 1,
/// no padding, one group, channels a multiple of 4 (cuBLASLt's INT8 leading dimensions).
inline std::string matmul_conv_refusal(const conv_problem& p) {
  if (p.dtype != numerics::int8) return std::string("a matmul runs INT8 layers only, not ") + to_string(p.dtype);
  if (p.layout != conv_layout::nhwc) return "a matmul needs NHWC";
  if (p.r != 1 || p.s != 1 || p.stride_h != 1 || p.stride_w != 1 || p.pad_h != 0 || p.pad_w != 0 || p.groups != 1) {
    return "a matmul runs 1x1, stride-1, unpadded, ungrouped convolutions only";
  }
  if (p.c % 4 != 0 || p.k % 4 != 0) return "a matmul needs C and K multiples of 4 (cuBLASLt's INT8 leading dimensions)";
  return "";
}

/// cuBLASLt's candidates for one 1x1 INT8 (shape, epilogue), from its heuristic; shared by the
/// layers of that shape, each of which binds its own descriptor (its bias).
class matmul_conv_candidates {
 public:
  /// One layer's matmul descriptor, and which candidates cuBLASLt accepts with it.
  struct binding {
    detail::unique_handle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
    std::vector<bool> accepted;  ///< by candidate
  };

  /// Enumerates at most `max_candidates` algorithms needing at most `workspace_limit` bytes.
  /// Throws unsupported naming why when `p` is no 1x1 INT8 layer (matmul_conv_refusal) or
  /// cuBLASLt offers nothing.
  matmul_conv_candidates(cublasLtHandle_t handle, const conv_problem& p, const conv_epilogue& e, int max_candidates,
                         std::size_t workspace_limit)
      : m_handle(handle), m_epilogue(e), m_workspace_limit(workspace_limit) {
    if (const std::string why = matmul_conv_refusal(p); !why.empty()) throw unsupported(why);
    if (handle == nullptr) throw unsupported("no cuBLASLt handle given for the matmul path");
    const std::uint64_t pixels = std::uint64_t(p.n * p.h * p.w);
    m_a = make_layout(std::uint64_t(p.c), std::uint64_t(p.k), p.c);
    m_b = make_layout(std::uint64_t(p.c), pixels, p.c);
    m_d = make_layout(std::uint64_t(p.k), pixels, p.k);
    // A bias of K floats stands in for the layers' own: its alignment is all the heuristic reads.
    device_buffer<float> stand_in(std::size_t(p.k));
    binding query = describe_layer(stand_in.data());
    cublasLtMatmulPreference_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw));
    detail::unique_handle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref(raw);
    const std::uint64_t ws = workspace_limit;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    std::vector<cublasLtMatmulHeuristicResult_t> results(std::size_t(std::max(1, max_candidates)));
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, query.desc.get(), m_a.get(), m_b.get(), m_d.get(),
                                                                 m_d.get(), raw, int(results.size()), results.data(), &returned);
    if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {
      throw unsupported(std::string("cuBLASLt offers no INT8 matmul with a per-channel alpha and ") + to_string(e) +
                        " epilogue (" + cublasLtGetStatusName(status) + ", " + std::to_string(returned) + " algorithms)");
    }
    for (int i = 0; i < returned; ++i) {
      if (results[std::size_t(i)].state != CUBLAS_STATUS_SUCCESS) continue;
      m_algos.push_back(results[std::size_t(i)].algo);
      m_info.push_back(cublaslt_algorithm_of(results[std::size_t(i)], i));
    }
    if (m_algos.empty()) throw unsupported("cuBLASLt's heuristic marked every INT8 matmul candidate unusable");
  }

  /// How many candidates there are.
  std::size_t size() const noexcept { return m_algos.size(); }
  /// Candidate `i`'s configuration.
  const gemm_algorithm& info(std::size_t i) const { return m_info.at(i); }

  /// A layer's descriptor (its pre-multiplied bias), each candidate checked by cuBLASLt with it.
  std::shared_ptr<const binding> bind(const float* matmul_bias) const {
    auto b = std::make_shared<binding>(describe_layer(matmul_bias));
    for (const cublasLtMatmulAlgo_t& algo : m_algos) {
      cublasLtMatmulHeuristicResult_t checked{};
      b->accepted.push_back(cublasLtMatmulAlgoCheck(m_handle, b->desc.get(), m_a.get(), m_b.get(), m_d.get(), m_d.get(), &algo,
                                                    &checked) == CUBLAS_STATUS_SUCCESS &&
                            checked.workspaceSize <= m_workspace_limit);
    }
    return b;
  }

  /// Enqueues candidate `i`: y = the epilogue of w^T x, with z added (beta) where the epilogue
  /// has a residual. `alpha` is the device vector of K pre-multiplied scales.
  void launch(std::size_t i, const binding& b, const void* x, const void* w, const void* z, void* y, const float* alpha,
              float beta, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) const {
    const void* c = m_epilogue.residual ? z : y;  // read only with a residual: beta is 0 without
    const float beta_applied = m_epilogue.residual ? beta : 0.0f;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmul(m_handle, b.desc.get(), alpha, w, m_a.get(), x, m_b.get(), &beta_applied, c, m_d.get(), y,
                                       m_d.get(), &m_algos.at(i), workspace, workspace_bytes, stream));
  }

 private:
  using layout_handle = detail::unique_handle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;

  static layout_handle make_layout(std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    cublasLtMatrixLayout_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, CUDA_R_8I, rows, cols, ld));
    return layout_handle(raw);
  }

  // INT32 sums, FP32 scales; A (the filters) transposed; alpha a device vector, beta on the
  // host; the bias, then ReLU where the epilogue has one.
  binding describe_layer(const float* bias) const {
    cublasLtMatmulDesc_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw, CUBLAS_COMPUTE_32I, CUDA_R_32F));
    binding b;
    b.desc = decltype(b.desc)(raw);
    auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
      GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw, attribute, &value, sizeof value));
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    // Beta on the host, 0 without a residual: the GPU machine's cuBLASLt (CUDA 13) offers no INT8
    // matmul in ALPHA_DEVICE_VECTOR_BETA_ZERO mode (H100, 2026-12-07; lab/probes/matmul_1x1_modes.cu).
    set(CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, m_epilogue.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    return b;
  }

  cublasLtHandle_t m_handle;
  conv_epilogue m_epilogue;
  std::size_t m_workspace_limit;
  layout_handle m_a, m_b, m_d;
  std::vector<cublasLtMatmulAlgo_t> m_algos;
  std::vector<gemm_algorithm> m_info;
};

}  // namespace gpucmp
