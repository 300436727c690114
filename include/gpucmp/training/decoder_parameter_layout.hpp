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
// the gaps stay zero. Host-only.
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

}  // namespace gpucmp
