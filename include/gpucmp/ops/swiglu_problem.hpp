// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A SwiGLU problem, the activation of a Llama MLP between its gate/up and down projections:
//   out = silu(gate) * up,   silu(g) = g / (1 + exp(-g)),
// over `tokens` rows. gate and up sit in one row per token, [gate | up] x intermediate (the
// fused gate/up projection's output, vLLM's SiluAndMul layout); out has `intermediate`
// elements a row. Arithmetic in FP32, one rounding at the end. Its backward (a training step's)
// takes out's gradient and the saved [gate | up] and writes their gradients, [dgate | dup]:
//   dgate = dout * up * silu'(gate),   dup = dout * silu(gate),
//   silu'(g) = s (1 + g (1 - s)),      s = 1 / (1 + exp(-g)).
// Host-only: the problem, its work and its output bound.
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes SwiGLU runs in: FP32 arithmetic over FP32, FP16 or BF16 tensors.
inline constexpr numerics swiglu_numerics[] = {numerics::fp32, numerics::fp16, numerics::bf16};

/// One SwiGLU over `tokens` rows.
struct swiglu_problem {
  std::int64_t tokens = 0;             ///< rows
  std::int64_t intermediate = 14336;   ///< output elements per row (Llama-3-8B's MLP: 14,336)
  numerics dtype = numerics::bf16;     ///< gate, up and out; arithmetic in FP32
  bool backward = false;               ///< the gradient: [dgate | dup] from dout and [gate | up]

  /// Throws invalid_argument naming the first impossible field, unsupported for a recipe
  /// other than swiglu_numerics.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("swiglu: " + what);
    };
    require(tokens > 0, "tokens must be positive, got " + std::to_string(tokens));
    require(intermediate > 0, "intermediate must be positive, got " + std::to_string(intermediate));
    require(double(tokens) * double(intermediate) * 2 < 9.0e18, "the tensor overflows 64-bit indexing");
    require_numerics(dtype, swiglu_numerics, "swiglu");
  }

  /// "bf16/8192x14336", "/bwd" appended for the backward.
  std::string name() const {
    const std::string s = std::string(to_string(dtype)) + "/" + std::to_string(tokens) + "x" + std::to_string(intermediate);
    return backward ? s + "/bwd" : s;
  }

  /// One call's work: gate and up read, out written; per output an exponential (counted as
  /// one operation), a division and two products. The backward reads dout too and writes
  /// dgate and dup: per output the exponential, the division and eight more operations.
  /// Items: tokens.
  gpucmp::work work() const {
    const double outputs = double(tokens) * double(intermediate);
    const double bytes = double(activation_bytes(dtype));
    gpucmp::work w;
    w.bytes_read = (backward ? 3 : 2) * outputs * bytes;
    w.bytes_written = (backward ? 2 : 1) * outputs * bytes;
    w.flops = (backward ? 10 : 5) * outputs;
    w.items = double(tokens);
    w.arithmetic = precision::none;  // memory-bound: read against the bandwidth
    return w;
  }

  /// Its row's axes: pass, tokens, intermediate, recipe.
  std::vector<axis> axes() const {
    return {axis::of("pass", backward ? "backward" : "forward"), axis::of("tokens", double(tokens)),
            axis::of("intermediate", double(intermediate)), axis::of("dtype", to_string(dtype))};
  }

  /// The rounding a correct kernel may show against a double reference from the same stored
  /// inputs: out's rounding and FP32's exp (2 ulp), division and products; bound() takes
  /// |reference| as l2 and 1 term. The backward's dgate takes as l2 the size of its terms,
  /// |dout up s| (1 + |g|): silu' crosses zero near g = -1.28, where 1 and g (1 - s) cancel
  /// and only FP32's rounding is left, and 1 - s carries s's rounding times |g|.
  tolerance output_tolerance() const noexcept {
    tolerance tol;
    const element_type out = types_of(dtype).output;
    tol.output_eps = unit_roundoff(out);
    if (element_bytes(out) < 4) tol.output_abs = element_info_of(out).smallest_subnormal / 2;
    tol.input_eps = (backward ? 10 : 6) * unit_roundoff(element_type::fp32);
    tol.sigmas = 2;
    return tol;
  }
};

}  // namespace gpucmp
