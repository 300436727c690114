// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A rotary position embedding (RoPE) problem: Q and K of each token rotated in place by
// angles position x frequency, pair by pair, as a decoder applies them after its QKV GEMM.
// Q, K and V sit in one row per token, [Q heads | K heads | V heads] x head_dim (the fused
// QKV projection's output); V is never touched. Frequencies follow Hugging Face's Llama:
//   inv_freq[i] = theta^(-2i / rotary_dim), i < rotary_dim / 2,
// with Llama 3.1's frequency-dependent scaling ("rope_type": "llama3") when its factor is
// over 1. The pairs are (i, i + rotary_dim/2) ("half", rotate_half: Hugging Face, NeoX) or
// (2i, 2i + 1) ("interleaved": GPT-J, Meta's reference code). Host-only: the problem, its
// work and its frequencies (a decoder's configuration names its RoPE with rope_scaling).
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes RoPE runs in: FP32 arithmetic over FP32, FP16 or BF16 tensors.
inline constexpr numerics rope_numerics[] = {numerics::fp32, numerics::fp16, numerics::bf16};

/// Which elements of a head form a rotated pair.
enum class rope_pairs {
  half,         ///< (i, i + rotary_dim / 2): rotate_half (Hugging Face Llama, GPT-NeoX)
  interleaved,  ///< (2i, 2i + 1): GPT-J and Meta's reference Llama code
};

/// "half" or "interleaved".
inline const char* to_string(rope_pairs p) noexcept { return p == rope_pairs::half ? "half" : "interleaved"; }

/// Llama 3.1's frequency-dependent scaling (Hugging Face's "llama3" rope_type): wavelengths
/// over original_positions / low_frequency_factor are divided by `factor`, those under
/// original_positions / high_frequency_factor kept, the ones between blended. factor 1: none.
struct rope_scaling {
  double factor = 1;                       ///< 8 for Llama 3.1 and 3.2; 1 turns scaling off
  double low_frequency_factor = 1;         ///< Llama 3.1: 1
  double high_frequency_factor = 4;        ///< Llama 3.1: 4
  std::int64_t original_positions = 8192;  ///< the context the model was trained at before scaling
};

/// One RoPE over `tokens` rows of fused Q, K and V.
struct rope_problem {
  std::int64_t tokens = 0;          ///< rows (the tokens of a batch)
  std::int64_t q_heads = 32;        ///< query heads (Llama-3-8B: 32)
  std::int64_t kv_heads = 8;        ///< key and value heads (grouped-query attention: fewer than q_heads)
  std::int64_t head_dim = 128;      ///< elements per head
  std::int64_t rotary_dim = 0;      ///< leading elements of each head that rotate (0: all of head_dim)
  numerics dtype = numerics::bf16;  ///< Q, K and V; arithmetic in FP32
  rope_pairs pairs = rope_pairs::half;
  double theta = 500000;                 ///< the frequencies' base (Llama 3: 500,000; Llama 2: 10,000)
  rope_scaling scaling;                  ///< none by default (Llama-3-8B)
  std::int64_t max_positions = 8192;     ///< positions are in [0, max_positions): rows of the cos/sin table
  /// The backward pass: dQ and dK from the gradients of the rotated Q and K, a rotation by minus
  /// the angle (a rotation's transpose is its inverse), in place like the forward; V passes.
  bool backward = false;

  /// Rotated elements per head.
  std::int64_t rotated() const noexcept { return rotary_dim == 0 ? head_dim : rotary_dim; }
  /// Elements of one token's row: Q, K and V heads.
  std::int64_t row_elements() const noexcept { return (q_heads + 2 * kv_heads) * head_dim; }

  /// Throws invalid_argument naming the first impossible field, unsupported for a recipe
  /// other than rope_numerics.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("rope: " + what);
    };
    require(tokens > 0, "tokens must be positive, got " + std::to_string(tokens));
    require(tokens <= 2147483647, "tokens " + std::to_string(tokens) + " is over 2^31 - 1 rows");
    require(q_heads > 0 && kv_heads > 0, "q_heads and kv_heads must be positive, got " + std::to_string(q_heads) + " and " +
                                             std::to_string(kv_heads));
    require(q_heads % kv_heads == 0, "q_heads " + std::to_string(q_heads) + " is not a multiple of kv_heads " +
                                         std::to_string(kv_heads) + " (grouped-query attention shares each KV head)");
    require(head_dim > 0 && head_dim <= 1024, "head_dim must be from 1 to 1024, got " + std::to_string(head_dim));
    require(rotary_dim >= 0 && rotary_dim <= head_dim,
            "rotary_dim must be from 0 (all) to head_dim " + std::to_string(head_dim) + ", got " + std::to_string(rotary_dim));
    require(rotated() % 2 == 0, "the rotated elements of a head (" + std::to_string(rotated()) + ") must be even: they rotate in pairs");
    require(std::isfinite(theta) && theta > 1, "theta must be finite and over 1");
    require(max_positions > 0 && max_positions <= (std::int64_t(1) << 24),
            "max_positions must be from 1 to 16,777,216, got " + std::to_string(max_positions));
    require(double(tokens) * double(row_elements()) < 9.0e18, "the tensor overflows 64-bit indexing");
    const rope_scaling& s = scaling;
    require(std::isfinite(s.factor) && s.factor >= 1, "scaling.factor must be 1 (none) or more");
    if (s.factor > 1) {
      require(s.low_frequency_factor > 0 && s.high_frequency_factor > s.low_frequency_factor,
              "scaling needs 0 < low_frequency_factor < high_frequency_factor");
      require(s.original_positions > 0, "scaling.original_positions must be positive");
    }
    require_numerics(dtype, rope_numerics, "rope");
  }

  /// The rotation frequencies, rotated() / 2 of them, in double (Hugging Face computes them
  /// in FP32; the decoder's check against transformers states that difference's bound).
  std::vector<double> inverse_frequencies() const {
    const std::int64_t n = rotated() / 2;
    std::vector<double> out(static_cast<std::size_t>(n));
    const double pi = 3.14159265358979323846;
    const rope_scaling& s = scaling;
    for (std::int64_t i = 0; i < n; ++i) {
      double f = std::pow(theta, -double(2 * i) / double(rotated()));
      if (s.factor > 1) {
        const double wavelength = 2 * pi / f;
        const double low_wavelength = double(s.original_positions) / s.low_frequency_factor;
        const double high_wavelength = double(s.original_positions) / s.high_frequency_factor;
        if (wavelength > low_wavelength) {
          f /= s.factor;
        } else if (wavelength >= high_wavelength) {
          const double smooth = (double(s.original_positions) / wavelength - s.low_frequency_factor) /
                                (s.high_frequency_factor - s.low_frequency_factor);
          f = (1 - smooth) * f / s.factor + smooth * f;
        }
      }
      out[std::size_t(i)] = f;
    }
    return out;
  }

  /// "bf16/4096x32+8x128/half" (tokens x q heads + kv heads x head_dim), "/rot64" when part
  /// of each head rotates, "/llama3x8" with Llama 3.1's scaling, "/bwd" for the backward.
  std::string name() const {
    std::string s = std::string(to_string(dtype)) + "/" + std::to_string(tokens) + "x" + std::to_string(q_heads) + "+" +
                    std::to_string(kv_heads) + "x" + std::to_string(head_dim) + "/" + to_string(pairs);
    if (rotated() != head_dim) s += "/rot" + std::to_string(rotated());
    if (scaling.factor > 1) {
      char f[32];
      std::snprintf(f, sizeof f, "%g", scaling.factor);
      s += std::string("/llama3x") + f;
    }
    return backward ? s + "/bwd" : s;
  }

  /// One call's work: the rotated elements of Q and K read and written once, each token's
  /// position read, and the cos/sin rows of the distinct positions (at most one per token)
  /// read; per rotated pair 4 products and 2 additions (FP32). Items: tokens.
  gpucmp::work work() const {
    const double rotated_elements = double(tokens) * double(q_heads + kv_heads) * double(rotated());
    const double bytes = double(activation_bytes(dtype));
    const double table_rows = double(std::min(tokens, max_positions));
    gpucmp::work w;
    w.bytes_read = rotated_elements * bytes + double(tokens) * 4 + table_rows * double(rotated() / 2) * 8;
    w.bytes_written = rotated_elements * bytes;
    w.flops = rotated_elements / 2 * 6;
    w.items = double(tokens);
    w.arithmetic = precision::none;  // memory-bound: read against the bandwidth
    return w;
  }

  /// Its row's axes: pass, tokens, heads, head_dim, rotated elements, pairs, recipe.
  std::vector<axis> axes() const {
    return {axis::of("pass", backward ? "backward" : "forward"),
            axis::of("tokens", double(tokens)),     axis::of("q_heads", double(q_heads)),
            axis::of("kv_heads", double(kv_heads)), axis::of("head_dim", double(head_dim)),
            axis::of("rotary_dim", double(rotated())), axis::of("pairs", to_string(pairs)),
            axis::of("dtype", to_string(dtype))};
  }
  /// The sine's sign: +1 forward, -1 backward (the angle negated).
  double sine_sign() const noexcept { return backward ? -1.0 : 1.0; }

  /// The rounding a correct kernel may show against a double reference from the same stored
  /// inputs and exact angles: the output's rounding, the cos/sin table's FP32 rounding and
  /// the FP32 products and sum; bound() takes |reference| and |x1 cos| + |x2 sin| (terms 2).
  tolerance output_tolerance() const noexcept {
    tolerance tol;
    const element_type out = types_of(dtype).output;
    tol.output_eps = unit_roundoff(out);
    if (element_bytes(out) < 4) tol.output_abs = element_info_of(out).smallest_subnormal / 2;
    tol.input_eps = 2 * unit_roundoff(element_type::fp32);  // cos or sin rounded, then the product
    tol.accumulate_eps = unit_roundoff(element_type::fp32);
    tol.sigmas = 4;  // two terms: a worst case, not a random walk
    return tol;
  }
};

}  // namespace gpucmp
