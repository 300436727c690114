// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How much device memory one training step of a Llama-style decoder needs, with activation
// checkpointing and without, before anything is allocated: what "gradient checkpointing to
// fit in less memory" saves, and the largest batch each way fits on a GPU.
//   - parameters and AdamW in BF16 mixed precision: FP32 master weights, the BF16 copy the
//     passes read, FP32 gradients (the weight-gradient GEMMs write FP32), AdamW's two FP32
//     moments: 18 bytes a trained parameter (PyTorch AMP holds the same: FP32 parameters,
//     gradients and moments, and autocast's BF16 copies of the weights);
//   - activations kept for the backward pass, a block and a token, in BF16: the block's input
//     and its normed input, Q/K/V after RoPE, attention's output, the residual after
//     attention and its normed value, gate and up, SwiGLU's output; in FP32 both norms'
//     1/rms and attention's softmax statistics (one a head). With checkpointing only each
//     block's input is kept, and the backward pass holds one block's activations, run again;
//   - activation gradients: the residual stream's (two: the one carried and the one formed)
//     and a block's largest pair of intermediate gradients;
//   - whole model: the final norm's input and output, BF16 logits of every token (their
//     gradient written over them), the tokens, labels and per-token losses.
// Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_memory.hpp>
#include <gpucmp/models/decoder_training_work.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpucmp {

/// A decoder training step's memory at one batch and sequence, in bytes.
struct decoder_training_memory_plan {
  double trained_parameters = 0;     ///< parameters the step trains
  double parameter_state_bytes = 0;  ///< FP32 master, BF16 copy, FP32 gradient, AdamW's two moments: 18 bytes each
  double kept_activation_bytes = 0;  ///< activations kept from the forward to the backward pass
  double recompute_bytes = 0;        ///< checkpointing: one block's activations, run again in the backward pass
  double gradient_bytes = 0;         ///< activation gradients live at once
  double head_bytes = 0;             ///< whole model: final norm, logits, tokens, labels, losses
  double workspace_bytes = 0;        ///< libraries' workspaces
  double block_activation_bytes = 0; ///< one block's kept activations (all of them, no checkpointing)

  /// Activations kept and recomputed: what checkpointing trades.
  double activation_bytes() const noexcept { return kept_activation_bytes + recompute_bytes; }
  /// Everything.
  double total() const noexcept {
    return parameter_state_bytes + activation_bytes() + gradient_bytes + head_bytes + workspace_bytes;
  }
};

/// Bytes a trained parameter takes with AdamW in BF16 mixed precision (the header's list).
inline constexpr double decoder_training_bytes_per_parameter = 4 + 2 + 4 + 4 + 4;

/// The memory plan of one training step of `model` on `batch` sequences of `sequence` tokens.
/// Throws invalid_argument naming a bad model, batch, sequence or option.
inline decoder_training_memory_plan plan_decoder_training_memory(const decoder_config& model, std::int64_t batch,
                                                                 std::int64_t sequence,
                                                                 const decoder_training_options& options = {}) {
  (void)plan_decoder_training_work(model, batch, sequence, options);  // the same checks, once
  const bool whole = options.scope == decoder_training_scope::whole_model;
  const double blocks = double(options.blocks_of(model));
  const double tokens = double(batch) * double(sequence);
  const double h = double(model.hidden_size), mlp = double(model.intermediate_size);
  const double q = double(model.heads * model.head_dim), kv = double(model.kv_heads * model.head_dim);
  decoder_training_memory_plan plan;
  plan.trained_parameters = whole ? double(model.parameters()) : blocks * (double(model.block_linear_parameters()) + 2 * h);
  plan.parameter_state_bytes = plan.trained_parameters * decoder_training_bytes_per_parameter;
  // x, norm(x), Q K V, O, x + attention, its norm, gate | up, SwiGLU: BF16; two 1/rms and a
  // softmax statistic a head: FP32.
  const double block_token = 2.0 * (4 * h + (q + 2 * kv) + q + 3 * mlp) + 4.0 * (2 + double(model.heads));
  plan.block_activation_bytes = tokens * block_token;
  if (options.checkpointing) {
    plan.kept_activation_bytes = blocks * tokens * h * 2;  // each block's input
    plan.recompute_bytes = plan.block_activation_bytes;
  } else {
    plan.kept_activation_bytes = blocks * plan.block_activation_bytes;
  }
  // The residual stream's gradient carried and formed; then the MLP's dSwiGLU and d(gate|up),
  // or attention's dO and dQKV, whichever is larger.
  plan.gradient_bytes = tokens * 2.0 * (2 * h + std::max(3 * mlp, q + (q + 2 * kv)));
  if (whole) {
    const double vocab = double(model.vocab_size);
    plan.head_bytes = tokens * (2.0 * 2 * h + 4.0 + 2.0 * vocab + 3 * 4.0);  // norm in/out, 1/rms, logits, ids/labels/losses
  }
  plan.workspace_bytes = options.workspace_bytes;
  return plan;
}

/// The largest batch of `sequence`-token sequences whose training step fits in
/// `capacity_bytes` (usable_memory_bytes of a GPU); 0 when not even one does.
inline std::int64_t largest_decoder_training_batch(const decoder_config& model, std::int64_t sequence, double capacity_bytes,
                                                   const decoder_training_options& options = {}) {
  return detail::largest_fitting(
      [&](std::int64_t b) { return plan_decoder_training_memory(model, b, sequence, options).total() <= capacity_bytes; });
}

}  // namespace gpucmp
