// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel mode on a library call: a cuBLAS BF16 GEMM (FP32 accumulate), verified against a
// double-precision reference on sampled elements, then measured in kernel mode (CUPTI
// timestamps, with its breakdown) and in graph mode (events).
//   gemm_kernel_mode [--size N] [--out DIR]   measure; prints a table, writes DIR/gemm_kernel_mode.json
//   gemm_kernel_mode --plain COUNT [--size N] launch the GEMM COUNT times, synchronizing after each,
//                                             with no tracing: for Nsight Compute, which cannot profile
//                                             a process that traces with CUPTI itself
#include <gpucmp/core.hpp>
#include <gpucmp/kernel_trace.hpp>

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw gpucmp::error(std::string("cuBLAS error ") + cublasGetStatusName(status) + " in " + what);
  }
}

struct cublas_handle {
  cublasHandle_t h = nullptr;
  cublas_handle() { check_cublas(cublasCreate(&h), "cublasCreate"); }
  ~cublas_handle() { cublasDestroy(h); }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
};

// C = A * B, all n x n column-major BF16, FP32 accumulate.
struct bf16_gemm {
  int n;
  cublas_handle handle;
  gpucmp::device_buffer<__nv_bfloat16> a, b, c;
  float alpha = 1.0f, beta = 0.0f;

  explicit bf16_gemm(int size)
      : n(size),
        a(std::size_t(size) * size, gpucmp::initial_fill::random(1)),
        b(std::size_t(size) * size, gpucmp::initial_fill::random(2)),
        c(std::size_t(size) * size, gpucmp::initial_fill::poison()) {}

  void operator()(cudaStream_t s) {
    check_cublas(cublasSetStream(handle.h, s), "cublasSetStream");
    check_cublas(cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n, b.data(),
                              CUDA_R_16BF, n, &beta, c.data(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  double flops() const { return 2.0 * n * double(n) * n; }

  // Checks 256 sampled elements (and that none is still poison) against a double reference.
  void verify(cudaStream_t s) {
    (*this)(s);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto ha = a.to_host(), hb = b.to_host(), hc = c.to_host();
    std::size_t nan_count = 0;
    for (const auto& v : hc) nan_count += std::isnan(__bfloat162float(v));
    if (nan_count > 0) throw gpucmp::error("GEMM verification: " + std::to_string(nan_count) + " outputs never written");
    for (int t = 0; t < 256; ++t) {
      const auto bits = gpucmp::random_bits(99, t);
      const int i = int(bits % n), j = int((bits >> 32) % n);
      double ref = 0, magnitude = 0;
      for (int l = 0; l < n; ++l) {
        const double x = __bfloat162float(ha[i + std::size_t(l) * n]), y = __bfloat162float(hb[l + std::size_t(j) * n]);
        ref += x * y;
        magnitude += std::fabs(x * y);
      }
      const double got = __bfloat162float(hc[i + std::size_t(j) * n]);
      // BF16 output: 8 bits of mantissa, so the result is within 2^-8 of |ref|, plus FP32
      // accumulation error over n terms.
      const double tolerance = std::ldexp(std::fabs(ref), -8) + 1e-5 * magnitude;
      if (std::fabs(got - ref) > tolerance) {
        std::ostringstream msg;
        msg << "GEMM verification failed at (" << i << ", " << j << "): got " << got << ", reference " << ref;
        throw gpucmp::error(msg.str());
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int size = 8192, plain = 0;
  std::string out_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--size" && i + 1 < argc) {
      size = std::stoi(argv[++i]);
    } else if (arg == "--plain" && i + 1 < argc) {
      plain = std::stoi(argv[++i]);
    } else if (arg == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--size N] [--out DIR] | --plain COUNT [--size N]\n", argv[0]);
      return 1;
    }
  }
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
    gpucmp::stream stream;
    bf16_gemm gemm(size);
    gemm.verify(stream.get());
    if (plain > 0) {
      for (int i = 0; i < plain; ++i) {
        gemm(stream.get());
        stream.synchronize();
      }
      std::printf("launched %d verified BF16 GEMMs of %d^3\n", plain, size);
      return 0;
    }
    gpucmp::engine eng;
    const auto kernel = eng.measure(gemm, gpucmp::mode::kernel);
    const auto graph = eng.measure(gemm, gpucmp::mode::graph);
    const auto& k = *kernel.kernels;
    std::ostringstream md;
    md << "BF16 GEMM " << size << "^3 (cuBLAS, FP32 accumulate, verified) on " << eng.device().name << "\n\n";
    md << "| measure | median us | TFLOP/s | samples |\n|---|---|---|---|\n";
    auto row = [&](const char* what, double s, std::size_t n) {
      char line[160];
      std::snprintf(line, sizeof line, "| %s | %.2f | %.1f | %zu |\n", what, s * 1e6, gemm.flops() / s * 1e-12, n);
      md << line;
    };
    row("kernel mode: busy (sum of kernel durations)", kernel.gpu.median, kernel.gpu.count);
    row("kernel mode: span", k.span.median, k.span.count);
    row("kernel mode: event time while tracing", k.traced_event.median, k.traced_event.count);
    row("graph mode (events)", graph.gpu.median, graph.gpu.count);
    md << "\nKernels per GEMM:\n\n| kernel | per launch | median us | share |\n|---|---|---|---|\n";
    for (const auto& s : k.kernels) {
      char line[512];
      std::snprintf(line, sizeof line, "| `%s` | %g | %.2f | %.1f%% |\n", s.name.c_str(), s.per_launch, s.median_s * 1e6,
                    100 * s.share);
      md << line;
    }
    std::printf("%s", md.str().c_str());
    if (!out_dir.empty()) {
      std::ofstream json(out_dir + "/gemm_kernel_mode.json");
      json.precision(9);
      json << "{\"gpu\": \"" << eng.device().name << "\", \"size\": " << size << ", \"kernel_busy_median_s\": "
           << kernel.gpu.median << ", \"kernel_busy_min_s\": " << kernel.gpu.min << ", \"kernel_span_median_s\": "
           << k.span.median << ", \"traced_event_median_s\": " << k.traced_event.median
           << ", \"graph_median_s\": " << graph.gpu.median << ", \"kernel_names\": [";
      for (std::size_t i = 0; i < k.kernels.size(); ++i) json << (i ? ", " : "") << "\"" << k.kernels[i].name << "\"";
      json << "]}\n";
      std::ofstream(out_dir + "/gemm_kernel_mode.md") << md.str();
      if (!json) throw std::runtime_error("cannot write " + out_dir + "/gemm_kernel_mode.json");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
