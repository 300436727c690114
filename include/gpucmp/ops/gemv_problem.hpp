// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A decode GEMV problem: y = x W^T for a few tokens (a decoder's batch of sequences, one new
// token each), W an n x k weight stored row-major as a linear layer stores it. Memory-bound:
// the weight is read once per call and dwarfs x and y, so its measure is the weight's bytes
// per second against the copy rate. Host-only: the bytes, the FLOPs, the cuBLASLt GEMM it is,
// and Llama-3-8B's layer shapes.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/specs/work.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes a decode GEMV runs in: FP16 or BF16 weights, activations and output, FP32 sums.
inline constexpr numerics gemv_numerics[] = {numerics::fp16, numerics::bf16};

/// One decode GEMV: y[batch x n] = x[batch x k] W[n x k]^T.
struct gemv_problem {
  std::int64_t batch = 1;  ///< tokens (rows of x and y)
  std::int64_t n = 4096;   ///< output features (rows of W)
  std::int64_t k = 4096;   ///< input features (columns of W)
  numerics dtype = numerics::bf16;  ///< x, y (and W unless fp8_weights) in this type, FP32 sums
  /// Weight-only quantization: W in E4M3 with one FP32 scale for the whole tensor
  /// (y = scale x W8^T), x and y staying in dtype; halves the bytes a decode step streams.
  bool fp8_weights = false;

  /// Throws invalid_argument naming the first impossible field, unsupported for a recipe
  /// other than gemv_numerics.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("gemv: " + what);
    };
    require(batch > 0, "batch must be positive");
    require(n > 0 && k > 0, "n and k must be positive (W is n x k)");
    require(double(n) * double(k) < 9.0e18, "W overflows 64-bit indexing");
    require_numerics(dtype, gemv_numerics, "gemv");
  }

  /// "bf16/b1_n4096_k4096", "/fp8_weights" appended for E4M3 weights.
  std::string name() const {
    return std::string(to_string(dtype)) + "/b" + std::to_string(batch) + "_n" + std::to_string(n) + "_k" +
           std::to_string(k) + (fp8_weights ? "/fp8_weights" : "");
  }

  /// W's element type.
  element_type weight_type() const noexcept { return fp8_weights ? element_type::fp8_e4m3 : types_of(dtype).input; }
  /// Bytes of W, the traffic that decides a decode GEMV's time.
  double weight_bytes() const noexcept { return double(n) * double(k) * double(element_bytes(weight_type())); }

  /// One call's work: 2 batch n k FLOPs; W and x read once, y written once. Items: tokens.
  gpucmp::work work() const {
    const double bytes = double(activation_bytes(dtype));
    gpucmp::work w;
    w.flops = 2 * double(batch) * double(n) * double(k);
    w.bytes_read = weight_bytes() + double(batch) * double(k) * bytes;
    w.bytes_written = double(batch) * double(n) * bytes;
    w.items = double(batch);
    w.arithmetic = peak_precision(dtype);
    return w;
  }

  /// Its row's axes.
  std::vector<axis> axes() const {
    return {axis::of("batch", double(batch)), axis::of("n", double(n)), axis::of("k", double(k)),
            axis::of("dtype", to_string(dtype)), axis::of("weights", to_string(weight_type()))};
  }

  /// The same product as a column-major GEMM (cuBLAS's convention): C (n x batch) = W^T' x',
  /// with W stored k x n column-major (its row-major n x k, transposed) and x k x batch. (With
  /// fp8_weights no cuBLASLt GEMM takes it: its A would be E4M3 and its B BF16.)
  gemm_problem as_gemm() const {
    gemm_problem g;
    g.m = n;
    g.n = batch;
    g.k = k;
    g.transpose_a = true;
    g.dtype = dtype;
    return g;
  }
};

/// One named layer of a model's decode step.
struct named_gemv {
  std::string layer;  ///< "qkv", "o", "gate_up", "down", "lm_head"
  gemv_problem problem;
};

/// Llama-3-8B's decode GEMVs at `batch` tokens (hidden 4096, 32 query and 8 KV heads of 128,
/// MLP 14336, vocabulary 128256): the fused QKV projection, the output projection, the fused
/// gate and up projections, the down projection and the LM head.
inline std::vector<named_gemv> llama3_8b_gemvs(std::int64_t batch, numerics dtype = numerics::bf16) {
  const struct {
    const char* layer;
    std::int64_t n, k;
  } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336},
                {"lm_head", 128256, 4096}};
  std::vector<named_gemv> out;
  for (const auto& s : shapes) out.push_back({s.layer, gemv_problem{batch, s.n, s.k, dtype}});
  return out;
}

}  // namespace gpucmp
