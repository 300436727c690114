// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A 2:4 structured-sparse GEMM problem, as a pruned linear layer runs it: D[m x n] = A[m x k]
// B, A the weights with two of every four consecutive values along k zero (one of two for
// TF32), B the activations stored as n rows of k values (a token a row), D row-major. FLOPs
// are counted dense, 2 m n k, as the datasheets' "with sparsity" figures count them, so a
// sparse GEMM's TFLOP/s sits beside the dense one's and its % of peak is taken against the
// sparse peak (work::structure). Which precisions and GPUs the sparse tensor cores take, and
// the bytes it must move (A compressed: its kept half and 2-bit indices). Host-only: the
// cuSPARSELt wrapper that runs it is ops/sparse_gemm.cuh.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The numerics a 2:4 sparse GEMM runs in: FP16 and BF16 with FP32 accumulation, TF32 (1:2
/// on FP32 values), FP8 E4M3 (BF16 out, per-tensor scales) and INT8 (INT32 out); cuSPARSELt
/// has no FP64 or FP16-accumulate sparse GEMM, and no E5M2 x E4M3 one.
inline constexpr numerics sparse_gemm_numerics[] = {numerics::tf32, numerics::fp16, numerics::bf16, numerics::fp8_e4m3,
                                                    numerics::int8};

/// One 2:4 sparse GEMM (the header's layout).
struct sparse_gemm_problem {
  std::int64_t m = 0;  ///< rows of A and D: a layer's outputs
  std::int64_t n = 0;  ///< columns of D: the tokens
  std::int64_t k = 0;  ///< the inner dimension, along which A is 2:4 sparse: a layer's inputs
  numerics dtype = numerics::fp16;  ///< sparse_gemm_numerics

  /// Values of k a group of the sparsity pattern spans: 4 (2:4), or 2 for TF32 (1:2).
  std::int64_t group() const noexcept { return dtype == numerics::tf32 ? 2 : 4; }

  /// Throws invalid_argument naming the first impossible field, unsupported for a precision
  /// sparse tensor cores do not take.
  void validate() const {
    if (!(m > 0 && n > 0 && k > 0)) {
      throw invalid_argument("sparse_gemm_problem: m, n and k must be positive (got " + std::to_string(m) + "x" +
                             std::to_string(n) + "x" + std::to_string(k) + ")");
    }
    require_numerics(dtype, sparse_gemm_numerics, "a 2:4 sparse GEMM");
    if (k % group() != 0) {
      throw invalid_argument("sparse_gemm_problem: k " + std::to_string(k) + " is not a multiple of the sparsity group (" +
                             std::to_string(group()) + " for " + to_string(dtype) + ")");
    }
    if (double(m) * double(k) + double(n) * double(k) + double(m) * double(n) > 9.0e18) {
      throw invalid_argument("sparse_gemm_problem: the matrices' sizes overflow 64-bit indexing");
    }
  }

  /// 2 m n k: the dense count (the header says why).
  double flops() const noexcept { return 2.0 * double(m) * double(n) * double(k); }
  /// Bytes of A compressed: its kept half and, for each kept value, a 2-bit index (1-bit for
  /// TF32's pairs), as cuSPARSELt stores it before any padding of its own.
  double compressed_a_bytes() const noexcept {
    const double kept = double(m) * double(k) / 2;
    return kept * double(element_bytes(types_of(dtype).weight)) + kept * (dtype == numerics::tf32 ? 1.0 : 2.0) / 8;
  }
  /// The fewest bytes it must move: A compressed, B read once, D written once.
  double min_bytes() const noexcept {
    return compressed_a_bytes() + double(n) * double(k) * double(element_bytes(types_of(dtype).input)) +
           double(m) * double(n) * double(element_bytes(types_of(dtype).output));
  }
  /// Device bytes of its buffers: A dense and compressed, B, D.
  double footprint_bytes() const noexcept {
    return double(m) * double(k) * double(element_bytes(types_of(dtype).weight)) + min_bytes();
  }
  /// "8192x8192x8192".
  std::string shape_name() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
  /// Its parameters as a result row's axes: m, n, k, dtype, sparsity.
  std::vector<axis> axes() const {
    return {axis::of("m", double(m)), axis::of("n", double(n)), axis::of("k", double(k)), axis::of("dtype", to_string(dtype)),
            axis::of("sparsity", dtype == numerics::tf32 ? "1:2" : "2:4")};
  }
};

/// "" when a GPU of compute capability `cc_major`.`cc_minor` has sparse tensor cores for
/// `dtype` (Ampere and later; FP8 from Ada), else why not.
inline std::string sparse_gemm_support(numerics dtype, int cc_major, int cc_minor) {
  if (cc_major < 8) {
    return "2:4 sparse GEMM needs sparse tensor cores (sm_80+), this GPU is sm_" + std::to_string(cc_major) +
           std::to_string(cc_minor);
  }
  try {
    check_supported(dtype, cc_major, cc_minor);
  } catch (const unsupported& e) {
    return e.what();
  }
  return {};
}

}  // namespace gpucmp
