// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What one training step of a Llama-style decoder must compute, before it is timed: forward,
// backward and, with activation checkpointing, the forward pass run again. A step trains
// either some decoder blocks alone (hidden states in, a given gradient of their output back:
// the "one decoder layer") or the whole model (embedding, blocks, final norm, the LM
// head on every token and the cross-entropy loss).
// Convention (MFU's, as PaLM defined it and Megatron reports it):
//   forward    linear layers 2 FLOPs a weight a token; attention 4 x head_dim a (query, key)
//              pair a head, causal as half the square (the attention operation's default);
//              the LM head 2 x vocab x hidden a token;
//   backward   2x the forward of every linear layer (data and weight gradients; the first
//              block's data gradient is counted: the embedding needs it), 2.5x attention's
//              forward (five matrix products against two, as the attention operation counts);
//   recompute  checkpointing's second forward pass of every block (not the LM head, whose
//              output the loss keeps). MFU counts the model's FLOPs, forward and backward;
//              the recomputed pass is a cost of checkpointing, shown beside it, never work.
// Norms, RoPE, SwiGLU, residual adds, the loss and AdamW are element-wise and not counted.
// Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/specs/work.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

/// What a decoder training step trains.
enum class decoder_training_scope {
  blocks,       ///< decoder_training_options::blocks blocks alone, from hidden states to hidden states
  whole_model,  ///< embedding to loss, every block of the model
};

/// "blocks" or "whole_model".
inline const char* to_string(decoder_training_scope s) noexcept {
  return s == decoder_training_scope::blocks ? "blocks" : "whole_model";
}

/// How a decoder is trained, for a step's work and memory plan.
struct decoder_training_options {
  decoder_training_scope scope = decoder_training_scope::blocks;
  std::int64_t blocks = 1;     ///< blocks trained when scope is blocks (the model's layers otherwise)
  bool checkpointing = false;  ///< keep each block's input only; run each block forward again in the backward pass
  double workspace_bytes = 256.0 * 1048576;  ///< cuBLASLt's and cuDNN's workspaces

  /// Throws invalid_argument naming the first bad field, for a model of `model_layers` blocks.
  void validate(std::int64_t model_layers) const {
    if (scope == decoder_training_scope::blocks && (blocks <= 0 || blocks > model_layers)) {
      throw invalid_argument("decoder training: blocks must be 1 to the model's " + std::to_string(model_layers) + ", got " +
                             std::to_string(blocks));
    }
    if (!(workspace_bytes >= 0) || workspace_bytes > 1e15) throw invalid_argument("decoder training: workspace_bytes must be finite and >= 0");
  }
  /// Blocks a step runs.
  std::int64_t blocks_of(const decoder_config& model) const noexcept {
    return scope == decoder_training_scope::blocks ? blocks : model.layers;
  }
};

/// The FLOPs of one training step (the header's convention).
struct decoder_training_work {
  double tokens = 0;              ///< batch x sequence
  double forward_flops = 0;       ///< the forward pass: blocks and, whole, the LM head
  double backward_flops = 0;      ///< the backward pass
  double recompute_flops = 0;     ///< checkpointing's second forward pass of the blocks (0 without)
  double attention_flops = 0;     ///< attention's part of forward + backward
  /// The model's FLOPs: what MFU divides by time.
  double model_flops() const noexcept { return forward_flops + backward_flops; }
  /// What the GPU runs: the model's FLOPs and the recomputed pass.
  double hardware_flops() const noexcept { return model_flops() + recompute_flops; }
  /// As the engine's work of one step (items: tokens). Bytes are not declared: a training step
  /// is compute-bound at any batch a GPU trains at.
  gpucmp::work as_work(precision arithmetic) const {
    gpucmp::work w;
    w.flops = model_flops();
    w.items = tokens;
    w.arithmetic = arithmetic;
    return w;
  }
};

/// The work of one training step of `model` on `batch` sequences of `sequence` tokens. Throws
/// invalid_argument naming a bad model, batch, sequence or option.
inline decoder_training_work plan_decoder_training_work(const decoder_config& model, std::int64_t batch, std::int64_t sequence,
                                                        const decoder_training_options& options = {}) {
  model.validate();
  options.validate(model.layers);
  if (batch <= 0) throw invalid_argument("decoder training: batch must be positive, got " + std::to_string(batch));
  if (sequence <= 0) throw invalid_argument("decoder training: sequence must be positive, got " + std::to_string(sequence));
  if (sequence > model.max_positions) {
    throw invalid_argument("decoder training: sequence " + std::to_string(sequence) + " is longer than " + model.name + "'s " +
                           std::to_string(model.max_positions) + " positions");
  }
  const double blocks = double(options.blocks_of(model));
  decoder_training_work w;
  w.tokens = double(batch) * double(sequence);
  const double linear = 2.0 * blocks * double(model.block_linear_parameters()) * w.tokens;
  const double square = double(sequence) * double(sequence) / 2;  // causal, half the square
  const double attention = 4.0 * blocks * double(model.heads) * double(model.head_dim) * square * double(batch);
  const double lm_head = options.scope == decoder_training_scope::whole_model
                             ? 2.0 * double(model.vocab_size) * double(model.hidden_size) * w.tokens : 0.0;
  w.forward_flops = linear + attention + lm_head;
  w.backward_flops = 2.0 * (linear + lm_head) + 2.5 * attention;
  w.recompute_flops = options.checkpointing ? linear + attention : 0.0;
  w.attention_flops = 3.5 * attention;
  return w;
}

}  // namespace gpucmp
