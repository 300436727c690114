// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A GEMM problem, C = op(A) op(B) (column-major, cuBLAS convention), with its exact FLOP
// count, the fewest bytes it must move, validation that names what is wrong, and which GPUs
// can run its precision. Host-only: the cuBLASLt wrapper that runs it is separate.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/specs_types.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace gpucmp {

/// Bytes of one A element.
inline std::size_t input_bytes(numerics t) noexcept { return element_bytes(types_of(t).input); }

/// Bytes of one B element.
inline std::size_t weight_bytes(numerics t) noexcept { return element_bytes(types_of(t).weight); }

/// Bytes of one C element.
inline std::size_t output_bytes(numerics t) noexcept { return element_bytes(types_of(t).output); }

/// The rounding a correct GEMM of numerics `t` may show against a double reference of the
/// same inputs, read from its tensor types: the output's and the accumulator's rounding units.
/// Products of FP16/BF16/FP8/INT8 inputs are exact in the tensor cores; TF32 rounds (or
/// truncates) each FP32 input to 10 mantissa bits; Hopper's FP8 tensor cores add with fewer
/// than FP32's bits, so FP8 gets a coarse accumulator; integer sums are exact.
inline tolerance gemm_tolerance(numerics t) noexcept {
  const tensor_types& types = types_of(t);
  tolerance tol;
  if (!element_info_of(types.accumulate).floating) {
    tol.sigmas = 0;  // exact
    return tol;
  }
  tol.output_eps = unit_roundoff(types.output);
  tol.accumulate_eps = unit_roundoff(types.accumulate);
  if (tf32_products(t)) tol.input_eps = 2 * std::ldexp(1.0, -10);
  if (peak_precision(t) == precision::fp8) tol.accumulate_eps = std::ldexp(1.0, -13);
  return tol;
}

/// Storage types of one GEMM precision: A, B, C elements and the alpha/beta scalar.
template <class A, class B, class C, class Scalar>
struct gemm_storage {
  using a_type = A;            ///< element of A
  using b_type = B;            ///< element of B
  using c_type = C;            ///< element of C (and D)
  using scalar_type = Scalar;  ///< alpha and beta
};

/// Calls f(gemm_storage<...>{}) with the storage types of `t`.
template <class F>
decltype(auto) visit_gemm_storage(numerics t, F&& f) {
  switch (t) {
    case numerics::fp64: return f(gemm_storage<double, double, double, double>{});
    case numerics::fp32:
    case numerics::tf32: return f(gemm_storage<float, float, float, float>{});
    case numerics::fp16: return f(gemm_storage<__half, __half, __half, float>{});
    case numerics::fp16_acc16: return f(gemm_storage<__half, __half, __half, __half>{});
    case numerics::bf16: return f(gemm_storage<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float>{});
    case numerics::fp8_e4m3: return f(gemm_storage<__nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16, float>{});
    case numerics::fp8_e5m2: return f(gemm_storage<__nv_fp8_e5m2, __nv_fp8_e4m3, __nv_bfloat16, float>{});
    case numerics::int8: return f(gemm_storage<std::int8_t, std::int8_t, std::int32_t, std::int32_t>{});
  }
  throw invalid_argument("gemm: numerics value " + std::to_string(int(t)) + " is not in the table");
}

/// One GEMM (or a batch of equal, strided GEMMs): C[m x n] = op(A) op(B), op(A) m x k.
struct gemm_problem {
  std::int64_t m = 0;          ///< rows of C
  std::int64_t n = 0;          ///< columns of C
  std::int64_t k = 0;          ///< inner dimension
  bool transpose_a = false;    ///< A is stored k x m and transposed
  bool transpose_b = false;    ///< B is stored n x k and transposed
  std::int64_t lda = 0;        ///< leading dimension of A (0: tight)
  std::int64_t ldb = 0;        ///< leading dimension of B (0: tight)
  std::int64_t ldc = 0;        ///< leading dimension of C (0: tight)
  std::int64_t batch = 1;      ///< number of GEMMs
  numerics dtype = numerics::fp32;  ///< the type of each tensor and of the accumulator (numerics.hpp)

  /// Rows of A as stored (column-major).
  std::int64_t a_rows() const noexcept { return transpose_a ? k : m; }
  /// Rows of B as stored.
  std::int64_t b_rows() const noexcept { return transpose_b ? n : k; }
  /// Leading dimensions with 0 resolved to the tight value.
  std::int64_t lda_or_tight() const noexcept { return lda != 0 ? lda : a_rows(); }
  /// See lda_or_tight().
  std::int64_t ldb_or_tight() const noexcept { return ldb != 0 ? ldb : b_rows(); }
  /// See lda_or_tight().
  std::int64_t ldc_or_tight() const noexcept { return ldc != 0 ? ldc : m; }

  /// Throws invalid_argument naming the first field that is impossible.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("gemm_problem: " + what);
    };
    require(m > 0 && n > 0 && k > 0, "m, n and k must be positive (got " + std::to_string(m) + "x" +
                                         std::to_string(n) + "x" + std::to_string(k) + ")");
    require(batch > 0, "batch must be positive");
    require(lda_or_tight() >= a_rows(), "lda " + std::to_string(lda) + " is less than A's " + std::to_string(a_rows()) + " rows");
    require(ldb_or_tight() >= b_rows(), "ldb " + std::to_string(ldb) + " is less than B's " + std::to_string(b_rows()) + " rows");
    require(ldc_or_tight() >= m, "ldc " + std::to_string(ldc) + " is less than C's " + std::to_string(m) + " rows");
    const double elements = double(batch) * (double(lda_or_tight()) * double(transpose_a ? m : k) +
                                             double(ldb_or_tight()) * double(transpose_b ? k : n) +
                                             double(ldc_or_tight()) * double(n));
    require(elements < 9.0e18, "the matrices' sizes overflow 64-bit indexing");
  }

  /// 2 m n k per GEMM (a multiply and an add per inner-product term), times batch.
  double flops() const noexcept { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
  /// The fewest bytes a GEMM must move: A and B read once, C written once (beta = 0).
  double min_bytes() const noexcept {
    return double(batch) * (double(m) * double(k) * double(input_bytes(dtype)) +
                            double(k) * double(n) * double(weight_bytes(dtype)) +
                            double(m) * double(n) * double(output_bytes(dtype)));
  }
  /// Bytes the buffers occupy (with their leading dimensions), for memory checks.
  double footprint_bytes() const noexcept {
    return double(batch) * (double(lda_or_tight()) * double(transpose_a ? m : k) * double(input_bytes(dtype)) +
                            double(ldb_or_tight()) * double(transpose_b ? k : n) * double(weight_bytes(dtype)) +
                            double(ldc_or_tight()) * double(n) * double(output_bytes(dtype)));
  }
  /// "8192x8192x8192", with "_tn" style suffixes for transposes and "_b8" for batches.
  std::string shape_name() const {
    std::string s = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    if (transpose_a || transpose_b) s += std::string("_") + (transpose_a ? "t" : "n") + (transpose_b ? "t" : "n");
    if (batch != 1) s += "_b" + std::to_string(batch);
    return s;
  }
  /// Its parameters as a result row's axes: m, n, k, batch, op ("nn", "tn", ...), the leading
  /// dimensions, dtype.
  std::vector<axis> axes() const {
    return {axis::of("m", double(m)),
            axis::of("n", double(n)),
            axis::of("k", double(k)),
            axis::of("batch", double(batch)),
            axis::of("op", std::string(transpose_a ? "t" : "n") + (transpose_b ? "t" : "n")),
            axis::of("lda", double(lda_or_tight())),
            axis::of("ldb", double(ldb_or_tight())),
            axis::of("ldc", double(ldc_or_tight())),
            axis::of("dtype", to_string(dtype))};
  }
};

/// How a GEMM runs on 16-byte-aligned copies of its operands. Hopper's fastest cuBLASLt
/// kernels load and store through TMA, and the heuristic offers them only when every
/// leading dimension *and* every matrix's row count is a multiple of 16 bytes, and padding
/// a leading dimension alone does not change that (the DeepBench 5124-row case in
/// docs/results/h200-operations.md, "Why the search is built this way"). So a misaligned
/// problem runs as a padded one: M (and K, N where they are row counts) rounded up, the staged
/// operands zero-padded (zeros in K add nothing; extra rows of A and columns of B make outputs
/// that are never copied out). Staging costs a copy of each staged operand per call, which the
/// search weighs like any other candidate's time.
struct gemm_staging_plan {
  bool a = false;          ///< A is copied in first
  bool b = false;          ///< B is copied in first
  bool c = false;          ///< the GEMM writes a staged C, which is then copied out
  std::int64_t m = 0;      ///< the extents the GEMM runs with (the problem's, or padded)
  std::int64_t n = 0;      ///< see m
  std::int64_t k = 0;      ///< see m
  std::int64_t lda = 0;    ///< leading dimension of A in the GEMM (staged or the problem's)
  std::int64_t ldb = 0;    ///< see lda
  std::int64_t ldc = 0;    ///< see lda

  /// Whether any operand is staged.
  bool any() const noexcept { return a || b || c; }
  /// "A, C": the staged operands.
  std::string operands() const {
    std::string s;
    for (auto [staged, name] : {std::pair{a, "A"}, std::pair{b, "B"}, std::pair{c, "C"}}) {
      if (staged) s += (s.empty() ? "" : ", ") + std::string(name);
    }
    return s;
  }
};

/// The staging `p` would need. Row counts that are not a multiple of 16 bytes are padded (M
/// always, as C's rows; K where it is A's or B's rows; N where it is B's), and every operand
/// whose extents change or whose leading dimension is not a multiple of 16 bytes is staged,
/// tightly packed. None for FP8 and INT8, whose layouts cuBLASLt constrains further (their
/// dimensions must be multiples of 16 and 4).
inline gemm_staging_plan staging_plan(const gemm_problem& p) {
  gemm_staging_plan plan;
  plan.m = p.m;
  plan.n = p.n;
  plan.k = p.k;
  plan.lda = p.lda_or_tight();
  plan.ldb = p.ldb_or_tight();
  plan.ldc = p.ldc_or_tight();
  if (p.dtype == numerics::fp8_e4m3 || p.dtype == numerics::fp8_e5m2 || p.dtype == numerics::int8) return plan;
  const auto in = static_cast<std::int64_t>(input_bytes(p.dtype)), out = static_cast<std::int64_t>(output_bytes(p.dtype));
  auto aligned = [](std::int64_t elements, std::int64_t bytes) { return (elements * bytes) % 16 == 0; };
  auto padded = [](std::int64_t elements, std::int64_t bytes) {  // element sizes here divide 16
    const std::int64_t per_16 = 16 / bytes;
    return (elements + per_16 - 1) / per_16 * per_16;
  };
  plan.m = padded(padded(p.m, in), out);  // rows of C, and of A unless A is transposed
  if (p.transpose_a || !p.transpose_b) plan.k = padded(p.k, in);
  if (p.transpose_b) plan.n = padded(p.n, in);
  plan.a = plan.m != p.m || plan.k != p.k || !aligned(plan.lda, in);
  plan.b = plan.n != p.n || plan.k != p.k || !aligned(plan.ldb, in);
  plan.c = plan.m != p.m || plan.n != p.n || !aligned(plan.ldc, out);
  if (plan.a) plan.lda = p.transpose_a ? plan.k : plan.m;
  if (plan.b) plan.ldb = p.transpose_b ? plan.n : plan.k;
  if (plan.c) plan.ldc = plan.m;
  return plan;
}

}  // namespace gpucmp
