// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// An RMSNorm problem, as a Llama block runs it before attention and before the MLP:
//   y = x / sqrt(mean(x^2) + eps) * weight
// over rows of `hidden` elements, optionally fused with the residual add before it
// (vLLM's and TensorRT-LLM's fused_add_rms_norm): the residual stream r becomes r + x, rounded
// to the tensors' type as a separate add would round it, and y is the norm of that rounded sum.
// Arithmetic in FP32. Host-only: the problem, its work and its output bound.
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes RMSNorm runs in: FP32 arithmetic over FP32, FP16 or BF16 tensors.
inline constexpr numerics rmsnorm_numerics[] = {numerics::fp32, numerics::fp16, numerics::bf16};

/// One RMSNorm over `tokens` rows of `hidden` elements.
struct rmsnorm_problem {
  std::int64_t tokens = 0;          ///< rows
  std::int64_t hidden = 4096;       ///< elements per row (Llama-3-8B: 4096)
  numerics dtype = numerics::bf16;  ///< x, residual, weight and y; arithmetic in FP32
  double eps = 1e-5;                ///< added to the mean square (Llama 3: 1e-5)
  bool residual = false;            ///< fused residual add: r = r + x, y = rmsnorm(r)

  /// Throws invalid_argument naming the first impossible field, unsupported for a recipe
  /// other than rmsnorm_numerics.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("rmsnorm: " + what);
    };
    require(tokens > 0, "tokens must be positive, got " + std::to_string(tokens));
    require(tokens <= 2147483647, "tokens " + std::to_string(tokens) + " is over 2^31 - 1 rows");
    require(hidden > 0 && hidden <= 65536, "hidden must be from 1 to 65,536, got " + std::to_string(hidden));
    require(std::isfinite(eps) && eps > 0, "eps must be positive and finite");
    require_numerics(dtype, rmsnorm_numerics, "rmsnorm");
  }

  /// "bf16/8192x4096" and "+residual" when fused with the residual add.
  std::string name() const {
    return std::string(to_string(dtype)) + "/" + std::to_string(tokens) + "x" + std::to_string(hidden) +
           (residual ? "+residual" : "");
  }

  /// One call's work: x (and r) read, y (and r) written, the weight read once; per element a
  /// square-and-add, a scale and a weight product. Items: tokens.
  gpucmp::work work() const {
    const double elements = double(tokens) * double(hidden);
    const double bytes = double(activation_bytes(dtype));
    gpucmp::work w;
    w.bytes_read = elements * bytes * (residual ? 2 : 1) + double(hidden) * bytes;
    w.bytes_written = elements * bytes * (residual ? 2 : 1);
    w.flops = elements * (residual ? 5 : 4);
    w.items = double(tokens);
    w.arithmetic = precision::none;  // memory-bound: read against the bandwidth
    return w;
  }

  /// Its row's axes: tokens, hidden, residual, recipe.
  std::vector<axis> axes() const {
    return {axis::of("tokens", double(tokens)), axis::of("hidden", double(hidden)),
            axis::of("residual", residual ? "fused" : "none"), axis::of("dtype", to_string(dtype))};
  }

  /// The rounding a correct kernel may show against a double reference from the same stored
  /// inputs (and the same rounded residual sum): y's rounding, the FP32 sum of hidden squares
  /// (a random walk of roundings, half of it in the root), the FP32 root and products;
  /// bound() takes |reference| as l2 and hidden as terms.
  tolerance output_tolerance() const noexcept {
    tolerance tol;
    const element_type out = types_of(dtype).output;
    tol.output_eps = unit_roundoff(out);
    if (element_bytes(out) < 4) tol.output_abs = element_info_of(out).smallest_subnormal / 2;
    tol.input_eps = 4 * unit_roundoff(element_type::fp32);  // rsqrt (2 ulp), the scale and the weight product
    tol.accumulate_eps = unit_roundoff(element_type::fp32);
    tol.sigmas = 6;
    return tol;
  }
};

}  // namespace gpucmp
