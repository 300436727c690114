// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where each trained tensor of a decoder lives in a training step's flat buffers (FP32 master
// weights, gradients and AdamW's moments, the 16-bit copy the passes read): one offset for
// all of them, so the optimizer is one pass over contiguous memory instead of a launch a
// tensor. Tensors are in gpucmp's fused layout (decoder_reference.hpp's): per block the
// attention norm, QKV (Q rows, then K, then V), O, the MLP norm, gate_up (gate rows, then up)
// and down; for the whole model then the embedding, the final norm and an untied LM head.
// Each tensor starts on a multiple of 8 elements (16 bytes of BF16, 32 of FP32: vector loads);
// the gaps stay zero. decoder_checkpoint_slices() maps a Hugging Face checkpoint's tensors
// (models/decoder_weights.hpp's names) onto it. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_training_work.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// One trained tensor: its name, shape (rows x cols; a vector is 1 x n) and first element.
struct decoder_parameter {
  std::string name;  ///< "layers.0.qkv", "embedding", "final_norm", "lm_head"
  std::int64_t rows = 0, cols = 0;
  std::int64_t offset = 0;  ///< elements into the flat buffers
  std::int64_t elements() const noexcept { return rows * cols; }
};

/// Every tensor a step trains and the flat buffers' length.
struct decoder_parameter_layout {
  std::vector<decoder_parameter> tensors;
  std::int64_t total = 0;  ///< elements of each flat buffer (a multiple of 8)

  /// The tensor named `name`; throws invalid_argument naming it otherwise.
  const decoder_parameter& at(const std::string& name) const {
    for (const decoder_parameter& t : tensors) {
      if (t.name == name) return t;
    }
    throw invalid_argument("decoder parameters: no tensor '" + name + "'");
  }
  /// The trained parameters (the gaps left out).
  std::int64_t parameters() const noexcept {
    std::int64_t n = 0;
    for (const decoder_parameter& t : tensors) n += t.elements();
    return n;
  }
};

/// Elements a tensor's offset is a multiple of.
inline constexpr std::int64_t decoder_parameter_alignment = 8;

/// The layout of what a step of `options` trains on `model` (the header's order).
inline decoder_parameter_layout plan_decoder_parameters(const decoder_config& model, const decoder_training_options& options) {
  model.validate();
  options.validate(model.layers);
  decoder_parameter_layout layout;
  auto add = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    layout.tensors.push_back({std::move(name), rows, cols, layout.total});
    const std::int64_t a = decoder_parameter_alignment;
    layout.total += (rows * cols + a - 1) / a * a;
  };
  const std::int64_t h = model.hidden_size, q = model.heads * model.head_dim, kv = model.kv_heads * model.head_dim;
  const std::int64_t m = model.intermediate_size;
  for (std::int64_t l = 0; l < options.blocks_of(model); ++l) {
    const std::string block = "layers." + std::to_string(l) + ".";
    add(block + "attention_norm", 1, h);
    add(block + "qkv", q + 2 * kv, h);
    add(block + "o", h, q);
    add(block + "mlp_norm", 1, h);
    add(block + "gate_up", 2 * m, h);
    add(block + "down", h, m);
  }
  if (options.scope == decoder_training_scope::whole_model) {
    add("embedding", model.vocab_size, h);
    add("final_norm", 1, h);
    if (!model.tied_embeddings) add("lm_head", model.vocab_size, h);
  }
  return layout;
}

/// Where one tensor of a Hugging Face checkpoint lives in the layout: Q, K and V are row ranges
/// of the fused QKV tensor, gate and up of gate_up.
struct decoder_checkpoint_slice {
  std::string checkpoint_name;  ///< "model.layers.0.self_attn.k_proj.weight"
  std::string tensor;           ///< the layout's: "layers.0.qkv"
  std::int64_t first_row = 0, rows = 0, cols = 0;
  std::int64_t elements() const noexcept { return rows * cols; }
};

/// The checkpoint tensors a step of `options` trains (models/decoder_weights.hpp's names and
/// order; blocks alone: the first blocks' tensors), each with its place in the layout.
inline std::vector<decoder_checkpoint_slice> decoder_checkpoint_slices(const decoder_config& model,
                                                                       const decoder_training_options& options) {
  const decoder_parameter_layout layout = plan_decoder_parameters(model, options);
  const std::int64_t h = model.hidden_size, q = model.heads * model.head_dim, kv = model.kv_heads * model.head_dim;
  const std::int64_t m = model.intermediate_size;
  std::vector<decoder_checkpoint_slice> out;
  auto add = [&](std::string name, const std::string& tensor, std::int64_t first_row, std::int64_t rows) {
    out.push_back({std::move(name), tensor, first_row, rows, layout.at(tensor).cols});
  };
  const bool whole = options.scope == decoder_training_scope::whole_model;
  if (whole) add("model.embed_tokens.weight", "embedding", 0, model.vocab_size);
  for (std::int64_t l = 0; l < options.blocks_of(model); ++l) {
    const std::string from = "model.layers." + std::to_string(l) + ".", to = "layers." + std::to_string(l) + ".";
    add(from + "input_layernorm.weight", to + "attention_norm", 0, 1);
    add(from + "self_attn.q_proj.weight", to + "qkv", 0, q);
    add(from + "self_attn.k_proj.weight", to + "qkv", q, kv);
    add(from + "self_attn.v_proj.weight", to + "qkv", q + kv, kv);
    add(from + "self_attn.o_proj.weight", to + "o", 0, h);
    add(from + "post_attention_layernorm.weight", to + "mlp_norm", 0, 1);
    add(from + "mlp.gate_proj.weight", to + "gate_up", 0, m);
    add(from + "mlp.up_proj.weight", to + "gate_up", m, m);
    add(from + "mlp.down_proj.weight", to + "down", 0, h);
  }
  if (whole) {
    add("model.norm.weight", "final_norm", 0, 1);
    if (!model.tied_embeddings) add("lm_head.weight", "lm_head", 0, model.vocab_size);
  }
  return out;
}

}  // namespace gpucmp
