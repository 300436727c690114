// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A square cuBLAS GEMM (C = A B, column-major, FP32 accumulate) in FP32, TF32, FP16 or BF16
// for the bundled benchmarks, verified on sampled elements against a double-precision
// reference before it is timed. The full GEMM wrappers (cuBLASLt, every precision,
// algorithm search) are the operations issue's; this is the minimum the suite needs.
#pragma once

#include <gpucmp/core.hpp>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace gpucmp_bench {

inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw gpucmp::error(std::string("cuBLAS error ") + cublasGetStatusName(status) + " in " + what);
  }
}

/// Owns a cuBLAS handle.
class cublas_handle {
 public:
  cublas_handle() { check_cublas(cublasCreate(&m_handle), "cublasCreate"); }
  ~cublas_handle() { cublasDestroy(m_handle); }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  cublasHandle_t get() const noexcept { return m_handle; }

 private:
  cublasHandle_t m_handle = nullptr;
};

inline double to_double(float v) { return v; }
inline double to_double(__half v) { return __half2float(v); }
inline double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }

/// C = A B with n x n matrices of T; `tf32` selects TF32 tensor cores for float.
template <class T>
class square_gemm {
 public:
  square_gemm(int n, bool tf32 = false)
      : m_n(n),
        m_tf32(tf32),
        m_a(std::size_t(n) * n, gpucmp::initial_fill::random(1)),
        m_b(std::size_t(n) * n, gpucmp::initial_fill::random(2)),
        m_c(std::size_t(n) * n, gpucmp::initial_fill::poison()) {}

  /// Enqueues the GEMM on `s`.
  void operator()(cudaStream_t s) {
    check_cublas(cublasSetStream(m_handle.get(), s), "cublasSetStream");
    const cudaDataType_t type = std::is_same_v<T, float>    ? CUDA_R_32F
                                : std::is_same_v<T, __half> ? CUDA_R_16F
                                                            : CUDA_R_16BF;
    const cublasComputeType_t compute = m_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check_cublas(cublasGemmEx(m_handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, m_n, m_n, m_n, &m_alpha, m_a.data(), type, m_n,
                              m_b.data(), type, m_n, &m_beta, m_c.data(), type, m_n, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  /// Work of one GEMM: 2n^3 FLOPs, A and B read and C written once.
  gpucmp::work work(gpucmp::precision p) const {
    gpucmp::work w;
    w.flops = 2.0 * m_n * double(m_n) * m_n;
    w.bytes_read = 2.0 * m_n * double(m_n) * sizeof(T);
    w.bytes_written = 1.0 * m_n * double(m_n) * sizeof(T);
    w.arithmetic = p;
    return w;
  }

  /// Runs the GEMM once and checks that every output was written and 256 sampled elements
  /// match a double-precision reference within the precision's bound. Throws on failure.
  void verify(cudaStream_t s) {
    (*this)(s);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto a = m_a.to_host(), b = m_b.to_host(), c = m_c.to_host();
    std::size_t unwritten = 0;
    for (const auto& v : c) unwritten += std::isnan(to_double(v));
    if (unwritten > 0) throw gpucmp::error("GEMM verification: " + std::to_string(unwritten) + " outputs never written");
    // Relative bounds: output rounding (|ref| x eps_out) plus input rounding inside the
    // tensor cores (sum |a b| x eps_in): TF32 keeps 10 mantissa bits of FP32 inputs.
    const double eps_out = std::is_same_v<T, float> ? 1e-6 : (std::is_same_v<T, __half> ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8));
    const double eps_in = m_tf32 ? std::ldexp(1.0, -10) : 1e-5;  // FP32 accumulation over n terms
    for (int t = 0; t < 256; ++t) {
      const auto bits = gpucmp::random_bits(99, t);
      const int i = int(bits % m_n), j = int((bits >> 32) % m_n);
      double ref = 0, magnitude = 0;
      for (int l = 0; l < m_n; ++l) {
        const double x = to_double(a[i + std::size_t(l) * m_n]), y = to_double(b[l + std::size_t(j) * m_n]);
        ref += x * y;
        magnitude += std::fabs(x * y);
      }
      const double got = to_double(c[i + std::size_t(j) * m_n]);
      if (std::fabs(got - ref) > eps_out * std::fabs(ref) + eps_in * magnitude + 1e-6) {
        std::ostringstream msg;
        msg << "GEMM verification failed at (" << i << ", " << j << "): got " << got << ", reference " << ref;
        throw gpucmp::error(msg.str());
      }
    }
  }

 private:
  int m_n;
  bool m_tf32;
  cublas_handle m_handle;
  gpucmp::device_buffer<T> m_a, m_b, m_c;
  float m_alpha = 1.0f, m_beta = 0.0f;
};

}  // namespace gpucmp_bench
