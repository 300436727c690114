// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A Llama-style decoder's geometry, named as Hugging Face's LlamaConfig names it, the presets
// a comparison asks about (Llama 3 8B and 70B, Llama 3.1 8B, Llama 3.2 1B), and its exact
// parameter count by part (what weights a checkpoint holds, and which of them an FP8
// checkpoint quantizes). Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/rope_problem.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// A Llama-style decoder: token embedding, `layers` blocks (RMSNorm, Q/K/V/O projections with
/// grouped-query attention and RoPE, RMSNorm, SwiGLU MLP of gate/up/down projections; no
/// biases), a final RMSNorm and the LM head (the embedding itself when tied).
struct decoder_config {
  std::string name;                    ///< "llama-3-8b"
  std::int64_t hidden_size = 0;        ///< width of the residual stream
  std::int64_t layers = 0;             ///< decoder blocks
  std::int64_t heads = 0;              ///< query heads
  std::int64_t kv_heads = 0;           ///< key/value heads (fewer than heads: grouped-query attention)
  std::int64_t head_dim = 0;           ///< elements per head
  std::int64_t intermediate_size = 0;  ///< MLP width (gate and up each, down's input)
  std::int64_t vocab_size = 0;         ///< tokens of the vocabulary
  std::int64_t max_positions = 0;      ///< longest context it was trained for (max_position_embeddings)
  bool tied_embeddings = false;        ///< the LM head is the embedding (Llama 3.2 1B and 3B)
  double rope_theta = 500000;          ///< RoPE's frequency base
  rope_scaling rope;                   ///< Llama 3.1's frequency scaling (factor 1: none)
  double norm_eps = 1e-5;              ///< RMSNorm's epsilon

  /// Throws invalid_argument naming the first impossible field.
  void validate() const {
    auto require = [&](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("decoder " + (name.empty() ? std::string("(unnamed)") : name) + ": " + what);
    };
    for (auto [value, field] : {std::pair{hidden_size, "hidden_size"}, std::pair{layers, "layers"}, std::pair{heads, "heads"},
                                std::pair{kv_heads, "kv_heads"}, std::pair{head_dim, "head_dim"},
                                std::pair{intermediate_size, "intermediate_size"}, std::pair{vocab_size, "vocab_size"},
                                std::pair{max_positions, "max_positions"}}) {
      require(value > 0, std::string(field) + " must be positive, got " + std::to_string(value));
    }
    require(heads % kv_heads == 0, "heads " + std::to_string(heads) + " is not a multiple of kv_heads " + std::to_string(kv_heads));
    require(head_dim % 2 == 0, "head_dim " + std::to_string(head_dim) + " must be even (RoPE rotates pairs)");
    require(std::isfinite(rope_theta) && rope_theta > 1, "rope_theta must be finite and over 1");
    require(std::isfinite(norm_eps) && norm_eps > 0, "norm_eps must be positive and finite");
    require(std::isfinite(rope.factor) && rope.factor >= 1, "rope.factor must be 1 (none) or more");
  }

  /// Weights of one block's linear layers: Q, K, V, O, gate, up and down.
  std::int64_t block_linear_parameters() const noexcept {
    const std::int64_t attention = hidden_size * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden_size;
    return attention + 3 * hidden_size * intermediate_size;
  }
  /// Weights of the RMSNorms: two a block and the final one.
  std::int64_t norm_parameters() const noexcept { return (2 * layers + 1) * hidden_size; }
  /// Weights of the token embedding.
  std::int64_t embedding_parameters() const noexcept { return vocab_size * hidden_size; }
  /// Weights of the LM head (none of its own when tied to the embedding).
  std::int64_t lm_head_parameters() const noexcept { return tied_embeddings ? 0 : vocab_size * hidden_size; }
  /// Every weight: Llama-3-8B has 8,030,261,248.
  std::int64_t parameters() const noexcept {
    return embedding_parameters() + layers * block_linear_parameters() + norm_parameters() + lm_head_parameters();
  }
};

namespace detail {

inline decoder_config llama3(const char* name, std::int64_t hidden, std::int64_t layers, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t mlp, std::int64_t max_positions, double rope_factor, bool tied) {
  decoder_config c;
  c.name = name;
  c.hidden_size = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = 8;
  c.head_dim = head_dim;
  c.intermediate_size = mlp;
  c.vocab_size = 128256;
  c.max_positions = max_positions;
  c.tied_embeddings = tied;
  c.rope_theta = 500000;
  c.rope.factor = rope_factor;  // with Llama 3.1's low 1, high 4 and 8,192 original positions
  c.norm_eps = 1e-5;
  return c;
}

}  // namespace detail

/// The presets, from each model's config.json on Hugging Face: llama-3-8b, llama-3.1-8b,
/// llama-3.2-1b, llama-3-70b.
inline std::vector<decoder_config> decoder_presets() {
  return {detail::llama3("llama-3-8b", 4096, 32, 32, 128, 14336, 8192, 1, false),
          detail::llama3("llama-3.1-8b", 4096, 32, 32, 128, 14336, 131072, 8, false),
          detail::llama3("llama-3.2-1b", 2048, 16, 32, 64, 8192, 131072, 32, true),
          detail::llama3("llama-3-70b", 8192, 80, 64, 128, 28672, 8192, 1, false)};
}

/// The preset named `name`; throws invalid_argument listing the presets otherwise.
inline decoder_config decoder_preset(const std::string& name) {
  std::string names;
  for (const decoder_config& c : decoder_presets()) {
    if (c.name == name) return c;
    names += (names.empty() ? "" : ", ") + c.name;
  }
  throw invalid_argument("unknown decoder '" + name + "' (presets: " + names + ")");
}

}  // namespace gpucmp
