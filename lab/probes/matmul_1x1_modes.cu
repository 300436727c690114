// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which cuBLASLt matmuls can run a 1x1 quantized convolution layer whole, and how fast, on
// ResNet-50's stride-1 1x1 shapes: the question before FP8 layers get the matmul path that
// INT8 layers have (models/matmul_conv.cuh). A quantized layer scales its weights per output
// channel; cuBLASLt scales FP8 operands per tensor unless a scale mode or a pointer mode says
// otherwise, and takes C (the residual) in FP16 or BF16 beside an FP8 D. For each shape and
// recipe it prints one markdown row: what cuBLASLt's heuristic answered, how many of its
// algorithms (at most 8) pass a check of 512 sampled outputs against a double reference, and
// the fastest verified one's time (20 launches in a CUDA graph, the median of 7 replays).
//   matmul_1x1_modes [BATCH ...]   (default: 32 256)
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/elements.cuh>

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

enum class kind { fp16, int8, fp8 };

// One way to run the layer: the operands' kind, how the per-channel scale reaches the product,
// and whether the residual comes in as C.
struct recipe {
  const char* name;
  kind operands;
  enum { host_scalar, alpha_vector, alpha_vector_beta_zero, outer_vector_a, outer_vector_ab } channel_scale;
  bool residual;
  cudaDataType_t c_type;  // C's type where there is a residual
};

struct shape {
  std::int64_t c, k, hw;  // input channels, output channels, the feature map's side
};

std::size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_16F ? 2 : 1; }

double value_of(cudaDataType_t t, const unsigned char* p) {
  switch (t) {
    case CUDA_R_16F: return double(__half2float(*reinterpret_cast<const __half*>(p)));
    case CUDA_R_8I: return double(*reinterpret_cast<const std::int8_t*>(p));
    case CUDA_R_8F_E4M3: return double(float(*reinterpret_cast<const __nv_fp8_e4m3*>(p)));
    default: throw gpucmp::invalid_argument("matmul_1x1_modes: no host reading of this type");
  }
}

// Uniform values over `range` of type `t`, filled on the GPU and copied back for the reference.
std::vector<unsigned char> fill(gpucmp::device_buffer<unsigned char>& buf, cudaDataType_t t, double range, std::uint64_t seed) {
  const std::size_t n = buf.bytes() / element_bytes(t);
  if (t == CUDA_R_16F) gpucmp::fill_uniform(reinterpret_cast<__half*>(buf.data()), n, seed, -range, range, nullptr);
  if (t == CUDA_R_8I) gpucmp::fill_uniform(reinterpret_cast<std::int8_t*>(buf.data()), n, seed, -range, range, nullptr);
  if (t == CUDA_R_8F_E4M3) gpucmp::fill_uniform(reinterpret_cast<__nv_fp8_e4m3*>(buf.data()), n, seed, -range, range, nullptr);
  return buf.to_host();
}

void row(const shape& s, std::int64_t batch, const recipe& r) {
  const std::int64_t m = s.k, n = batch * s.hw * s.hw, kd = s.c;
  const cudaDataType_t ab = r.operands == kind::fp16 ? CUDA_R_16F : r.operands == kind::int8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  const cudaDataType_t d_type = ab;
  const cudaDataType_t c_type = r.residual ? r.c_type : (r.operands == kind::fp8 ? CUDA_R_16F : ab);
  const double range = r.operands == kind::int8 ? 127 : r.operands == kind::fp8 ? 2 : 1;
  const double spread = std::sqrt(double(kd)) * range * range / 3;
  const double out_range = r.operands == kind::int8 ? 32 : r.operands == kind::fp8 ? 64 : 4;

  gpucmp::device_buffer<unsigned char> a(std::size_t(m * kd) * element_bytes(ab)), b(std::size_t(kd * n) * element_bytes(ab)),
      c(std::size_t(m * n) * element_bytes(c_type)), d(std::size_t(m * n) * element_bytes(d_type));
  const std::vector<unsigned char> ha = fill(a, ab, range, 1), hb = fill(b, ab, range, 2);
  const std::vector<unsigned char> hc = r.residual ? fill(c, c_type, 4, 3) : std::vector<unsigned char>{};

  // Per-channel scales (the product's), a bias, beta: real values the epilogue applies.
  std::vector<float> alpha(static_cast<std::size_t>(m)), bias(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) {
    alpha[std::size_t(i)] = float(out_range * (1.0 + 3.0 * double(i % 7) / 6) / (4 * spread));
    bias[std::size_t(i)] = float(out_range * (0.05 * double(i % 5) - 0.1));
  }
  const float beta = r.residual ? 0.5f : 0.0f;
  // What each recipe applies: a per-tensor recipe cannot scale per channel, so every channel
  // takes alpha[0] there.
  std::vector<float> applied = alpha;
  if (r.channel_scale == recipe::host_scalar) std::fill(applied.begin(), applied.end(), alpha[0]);

  const std::size_t ms = static_cast<std::size_t>(m), ns = static_cast<std::size_t>(n);
  gpucmp::device_buffer<float> alpha_dev(ms), ones(ns), one(1), bias32(ms);
  alpha_dev.copy_from_host(alpha);
  ones.copy_from_host(std::vector<float>(std::size_t(n), 1.0f));
  one.copy_from_host(std::vector<float>{1.0f});
  bias32.copy_from_host(bias);
  std::vector<__half> bias_half(bias.size());
  for (std::size_t i = 0; i < bias.size(); ++i) bias_half[i] = __float2half(bias[i]);
  gpucmp::device_buffer<__half> bias16(bias.size());
  bias16.copy_from_host(bias_half);
  gpucmp::device_buffer<float> alpha0(1);
  alpha0.copy_from_host(std::vector<float>{alpha[0]});

  cublasLtHandle_t handle = nullptr;
  GPUCMP_CUBLAS_CHECK(cublasLtCreate(&handle));
  cublasLtMatmulDesc_t desc = nullptr;
  const cublasComputeType_t compute = r.operands == kind::int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU_BIAS);
  const bool bias_is_float = r.operands == kind::int8;
  set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_is_float ? CUDA_R_32F : CUDA_R_16F);
  const void* bias_ptr = bias_is_float ? static_cast<const void*>(bias32.data()) : static_cast<const void*>(bias16.data());
  set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);
  float host_alpha = alpha[0];
  const void* alpha_arg = &host_alpha;
  // A vector of per-channel alphas, beta on the host (0 without a residual) or, in its own
  // mode, zero.
  const bool vector_alpha = r.channel_scale == recipe::alpha_vector || r.channel_scale == recipe::alpha_vector_beta_zero;
  if (vector_alpha) {
    set(CUBLASLT_MATMUL_DESC_POINTER_MODE, r.channel_scale == recipe::alpha_vector_beta_zero
                                               ? CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO
                                               : CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST);
    alpha_arg = alpha_dev.data();
  }
  if (r.operands == kind::fp8) {
    // The product's scale as A's scale (alpha then 1); D's scale 1.
    host_alpha = 1.0f;
    if (vector_alpha) {
      alpha_arg = alpha_dev.data();
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const float*>(one.data()));
    } else if (r.channel_scale == recipe::host_scalar) {
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const float*>(alpha0.data()));
    } else {
      set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, std::int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const float*>(alpha_dev.data()));
    }
    if (r.channel_scale == recipe::outer_vector_ab) {
      set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, std::int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const float*>(ones.data()));
    } else {
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const float*>(one.data()));
    }
    set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, static_cast<const float*>(one.data()));
  }
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, ab, std::uint64_t(kd), std::uint64_t(m), kd));
  GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, ab, std::uint64_t(kd), std::uint64_t(n), kd));
  GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, c_type, std::uint64_t(m), std::uint64_t(n), m));
  GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, d_type, std::uint64_t(m), std::uint64_t(n), m));
  cublasLtMatmulPreference_t pref = nullptr;
  GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws_bytes = std::uint64_t(32) << 20;
  GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  gpucmp::device_buffer<unsigned char> workspace(ws_bytes);
  std::vector<cublasLtMatmulHeuristicResult_t> results(8);
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, ld, pref, int(results.size()),
                                                               results.data(), &returned);

  std::printf("| c%lld k%lld %lldx%lld n%lld | %s | %s, %d | ", static_cast<long long>(s.c), static_cast<long long>(s.k),
              static_cast<long long>(s.hw), static_cast<long long>(s.hw), static_cast<long long>(batch), r.name,
              cublasLtGetStatusName(status), returned);
  int verified = 0;
  double best_us = INFINITY;
  std::string worst;
  if (status == CUBLAS_STATUS_SUCCESS) {
    gpucmp::stream st;
    const unsigned char* c_host = r.residual ? hc.data() : nullptr;
    for (int i = 0; i < returned; ++i) {
      const cublasLtMatmulAlgo_t* algo = &results[std::size_t(i)].algo;
      auto launch = [&](cudaStream_t on) {
        GPUCMP_CUBLAS_CHECK(cublasLtMatmul(handle, desc, alpha_arg, a.data(), la, b.data(), lb, &beta,
                                           c.data(), lc, d.data(), ld, algo, workspace.data(),
                                           ws_bytes, on));
      };
      try {
        GPUCMP_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x7F, d.bytes(), st.get()));
        launch(st.get());
        GPUCMP_CUDA_CHECK(cudaStreamSynchronize(st.get()));
      } catch (const std::exception& e) {
        worst = std::string("algo ") + std::to_string(i) + ": " + e.what();
        continue;
      }
      const std::vector<unsigned char> hd = d.to_host();
      // 512 sampled outputs against the double reference, each within its output's rounding
      // (a unit of INT8, 2^-3 relative for FP8 E4M3, 2^-9 for FP16) and a little of the
      // outputs' spread for the sums' own rounding.
      double max_excess = 0;
      for (int t = 0; t < 512; ++t) {
        const std::int64_t row_i = (t * 7919) % m, col = (std::int64_t(t) * 104729) % n;
        double sum = 0;
        for (std::int64_t q = 0; q < kd; ++q) {
          sum += value_of(ab, &ha[std::size_t((row_i * kd + q)) * element_bytes(ab)]) *
                 value_of(ab, &hb[std::size_t((col * kd + q)) * element_bytes(ab)]);
        }
        double v = double(applied[std::size_t(row_i)]) * sum + double(bias[std::size_t(row_i)]);
        if (c_host) v += beta * value_of(c_type, &c_host[std::size_t(col * m + row_i) * element_bytes(c_type)]);
        v = std::max(v, 0.0);
        const double got = value_of(d_type, &hd[std::size_t(col * m + row_i) * element_bytes(d_type)]);
        double bound = r.operands == kind::int8 ? 1.0 : r.operands == kind::fp8 ? 0.125 * v + 0.02 * out_range : 0.002 * v + 0.002 * out_range;
        if (r.operands == kind::int8) v = std::min(127.0, std::round(v));
        if (r.operands == kind::fp8) v = std::min(448.0, v);
        max_excess = std::max(max_excess, std::abs(got - v) / bound);
      }
      if (!(max_excess <= 1.0)) {
        char why[96];
        std::snprintf(why, sizeof why, "algo %d: %.3g of its bound", i, max_excess);
        worst = why;
        continue;
      }
      ++verified;
      gpucmp::graph captured = gpucmp::capture_graph(st.get(), [&](cudaStream_t on) {
        for (int l = 0; l < 20; ++l) launch(on);
      });
      gpucmp::graph_exec exec(captured.get());
      exec.launch(st.get());
      std::vector<double> us;
      for (int rep = 0; rep < 7; ++rep) {
        gpucmp::event start, stop;
        start.record(st.get());
        exec.launch(st.get());
        stop.record(st.get());
        stop.synchronize();
        us.push_back(gpucmp::elapsed_s(start, stop) * 1e6 / 20);
      }
      std::sort(us.begin(), us.end());
      best_us = std::min(best_us, us[us.size() / 2]);
    }
  }
  if (verified > 0) {
    std::printf("%d of %d | %.2f | %.0f | %s |\n", verified, returned, best_us, 2.0 * double(m) * double(n) * double(kd) / (best_us * 1e6),
                worst.c_str());
  } else {
    std::printf("0 of %d | - | - | %s |\n", returned, worst.c_str());
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> batches;
  for (int i = 1; i < argc; ++i) batches.push_back(std::atoll(argv[i]));
  if (batches.empty()) batches = {32, 256};
  const std::vector<shape> shapes = {{64, 64, 56},    {64, 256, 56},   {256, 64, 56},   {256, 128, 56},
                                     {128, 512, 28},  {512, 128, 28},  {512, 256, 28},  {256, 1024, 14},
                                     {1024, 256, 14}, {1024, 512, 14}, {512, 2048, 7},  {2048, 512, 7}};
  const std::vector<recipe> recipes = {
      {"fp16, host alpha", kind::fp16, recipe::host_scalar, false, CUDA_R_16F},
      {"int8, alpha vector, beta 0 on the host", kind::int8, recipe::alpha_vector, false, CUDA_R_8I},
      {"int8, alpha vector, beta zero mode", kind::int8, recipe::alpha_vector_beta_zero, false, CUDA_R_8I},
      {"int8, alpha vector, residual int8", kind::int8, recipe::alpha_vector, true, CUDA_R_8I},
      {"fp8, per-tensor scales", kind::fp8, recipe::host_scalar, false, CUDA_R_16F},
      {"fp8, alpha vector", kind::fp8, recipe::alpha_vector_beta_zero, false, CUDA_R_16F},
      {"fp8, A outer vector", kind::fp8, recipe::outer_vector_a, false, CUDA_R_16F},
      {"fp8, A and B outer vectors", kind::fp8, recipe::outer_vector_ab, false, CUDA_R_16F},
      {"fp8, A outer vector, residual fp16", kind::fp8, recipe::outer_vector_a, true, CUDA_R_16F},
      {"fp8, A outer vector, residual fp8", kind::fp8, recipe::outer_vector_a, true, CUDA_R_8F_E4M3},
  };
  std::printf("| shape | recipe | heuristic | verified | best us | TFLOP/s | a failure |\n|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (std::int64_t batch : batches) {
    for (const shape& s : shapes) {
      for (const recipe& r : recipes) {
        try {
          row(s, batch, r);
        } catch (const std::exception& e) {
          std::printf("error: %s |\n", e.what());
          status = 1;
        }
        std::fflush(stdout);
      }
    }
  }
  return status;
}
