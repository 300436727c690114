// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A Llama-style decoder's geometry, named as Hugging Face's LlamaConfig names it, the presets
// a comparison asks about (Llama 3 8B and 70B, Llama 3.1 8B, Llama 3.2 1B), and its exact
// parameter count by part (what weights a checkpoint holds, and which of them an FP8
// checkpoint quantizes), also read from a Hugging Face config.json. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/io/json.hpp>
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

/// The RoPE of `c` on `tokens` rows of fused QKV in `dtype`, its cos/sin table holding
/// `max_positions` positions (0: the model's max_positions).
inline rope_problem decoder_rope(const decoder_config& c, std::int64_t tokens, numerics dtype = numerics::bf16,
                                 std::int64_t max_positions = 0) {
  rope_problem r;
  r.tokens = tokens;
  r.q_heads = c.heads;
  r.kv_heads = c.kv_heads;
  r.head_dim = c.head_dim;
  r.dtype = dtype;
  r.theta = c.rope_theta;
  r.scaling = c.rope;
  r.max_positions = max_positions > 0 ? max_positions : c.max_positions;
  return r;
}

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

/// The decoder a Hugging Face Llama config.json describes (`text`, named `source` in errors):
/// hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (default: the
/// heads), head_dim (default: hidden_size / heads), intermediate_size, vocab_size,
/// max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings and a "llama3"
/// rope_scaling; or, as transformers 5 writes them, rope_theta and the rope_type ("default" or
/// "llama3" with its factors) inside rope_parameters. Throws invalid_argument naming the file
/// and the key that is missing (rope_theta included: a wrong base would go unnoticed), of the
/// wrong type, or describes something else (another model_type, another rope_type).
inline decoder_config decoder_config_from_json(const std::string& text, const std::string& source, const std::string& name) {
  detail::json doc;
  try {
    doc = detail::parse_json(text);
  } catch (const detail::json_error& e) {
    throw invalid_argument(source + ": malformed JSON: " + e.what());
  }
  if (!doc.is_object()) throw invalid_argument(source + ": not a JSON object (a Hugging Face config.json is one)");
  auto fail = [&](const std::string& what) { throw invalid_argument(source + ": " + what); };
  if (const detail::json* type = doc.find("model_type"); type != nullptr && (!type->is_string() || type->string() != "llama")) {
    fail("model_type is " + (type->is_string() ? "'" + type->string() + "'" : std::string("not a string")) +
         ", not 'llama' (a Llama-style decoder)");
  }
  auto number = [&](const detail::json& object, const std::string& key, const std::string& where) -> const detail::json* {
    const detail::json* v = object.find(key);
    if (v != nullptr && !v->is_number()) fail(where + key + " must be a number");
    return v;
  };
  auto count = [&](const std::string& key, std::int64_t fallback, bool required) {
    const detail::json* v = number(doc, key, "");
    if (v == nullptr) {
      if (required) fail(key + " is missing");
      return fallback;
    }
    if (!(v->number() >= 1 && v->number() <= 9.0e15) || v->number() != std::floor(v->number())) {
      fail(key + " must be a positive whole number");
    }
    return std::int64_t(v->number());
  };
  decoder_config c;
  c.name = name;
  c.hidden_size = count("hidden_size", 0, true);
  c.layers = count("num_hidden_layers", 0, true);
  c.heads = count("num_attention_heads", 0, true);
  c.kv_heads = count("num_key_value_heads", c.heads, false);
  c.head_dim = count("head_dim", c.hidden_size / c.heads, false);
  c.intermediate_size = count("intermediate_size", 0, true);
  c.vocab_size = count("vocab_size", 0, true);
  c.max_positions = count("max_position_embeddings", 0, true);
  const detail::json* parameters = doc.find("rope_parameters");  // transformers 5
  if (parameters != nullptr && parameters->type() == detail::json::kind::null) parameters = nullptr;
  if (parameters != nullptr && !parameters->is_object()) fail("rope_parameters must be an object");
  const detail::json* theta = number(doc, "rope_theta", "");
  if (theta == nullptr && parameters != nullptr) theta = number(*parameters, "rope_theta", "rope_parameters.");
  if (theta == nullptr) fail("rope_theta is missing (at the top level or in rope_parameters)");
  c.rope_theta = theta->number();
  if (const detail::json* v = number(doc, "rms_norm_eps", "")) c.norm_eps = v->number();
  if (const detail::json* v = doc.find("tie_word_embeddings")) {
    if (!v->is_bool()) fail("tie_word_embeddings must be true or false");
    c.tied_embeddings = v->boolean();
  }
  // The scaling: rope_scaling (null: none), else rope_parameters' rope_type.
  const detail::json* r = doc.find("rope_scaling");
  std::string key = "rope_scaling";
  if (r != nullptr && r->type() == detail::json::kind::null) r = nullptr;
  if (r == nullptr && parameters != nullptr) {
    const detail::json* type = parameters->find("rope_type");
    if (type != nullptr && (!type->is_string() || (type->string() != "default" && type->string() != "llama3"))) {
      fail("rope_parameters.rope_type must be 'default' or 'llama3' (Llama 3.1's frequency scaling)");
    }
    if (type != nullptr && type->string() == "llama3") {
      r = parameters;
      key = "rope_parameters";
    }
  }
  if (r != nullptr) {
    const detail::json* type = r->is_object() ? r->find("rope_type") : nullptr;
    if (type == nullptr) type = r->is_object() ? r->find("type") : nullptr;
    if (type == nullptr || !type->is_string() || type->string() != "llama3") {
      fail("rope_scaling must be null or of rope_type 'llama3' (Llama 3.1's frequency scaling)");
    }
    const detail::json* factor = number(*r, "factor", key + ".");
    const detail::json* low = number(*r, "low_freq_factor", key + ".");
    const detail::json* high = number(*r, "high_freq_factor", key + ".");
    const detail::json* original = number(*r, "original_max_position_embeddings", key + ".");
    if (factor == nullptr || low == nullptr || high == nullptr || original == nullptr) {
      fail(key + " of rope_type 'llama3' needs factor, low_freq_factor, high_freq_factor and "
           "original_max_position_embeddings");
    }
    c.rope.factor = factor->number();
    c.rope.low_frequency_factor = low->number();
    c.rope.high_frequency_factor = high->number();
    c.rope.original_positions = std::int64_t(original->number());
  }
  try {
    c.validate();
  } catch (const error& e) {
    fail(e.what());
  }
  return c;
}

}  // namespace gpucmp
