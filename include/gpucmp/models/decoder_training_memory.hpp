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
//   - activations kept for the backward pass, in BF16: every block's input and the last
//     block's output; a block's own, a token: its normed input, Q/K/V after RoPE, attention's
//     output, the residual after attention and its normed value, gate and up, SwiGLU's output,
//     and in FP32 both norms' 1/rms and attention's softmax statistics (one a head). With
//     checkpointing the backward pass holds one block's own, run again;
//   - the step's scratch, what training/decoder_training.cuh allocates once: the fused QKV
//     rows and their gradient, dQ, dK and dV, dO, dSwiGLU and d(gate|up), three residual-width
//     gradients (and a block-scope step's output gradient);
//   - whole model: the final norm's output and 1/rms, BF16 logits of every token (their
//     gradient written over them), the tokens, labels and per-token FP64 losses;
//   - the attention operation's own Q, K, V, O, dO, dQ, dK, dV and statistics, which its search
//     and check run on, and cuDNN's backward workspace: dQ accumulated in FP32, twice over in
//     the engines seen on the H100 (docs/results/h100-decoder-training.md).
// Everything but the workspaces is what decoder_trainer::allocated_bytes() reports. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_memory.hpp>
#include <gpucmp/models/decoder_training_work.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

/// A decoder training step's memory at one batch and sequence, in bytes.
struct decoder_training_memory_plan {
  double trained_parameters = 0;     ///< parameters the step trains
  double parameter_state_bytes = 0;  ///< FP32 master, BF16 copy, FP32 gradient, AdamW's two moments: 18 bytes each
  double kept_activation_bytes = 0;  ///< activations kept from the forward to the backward pass
  double recompute_bytes = 0;        ///< checkpointing: one block's activations, run again in the backward pass
  double gradient_bytes = 0;         ///< the step's scratch: activation gradients and the fused QKV rows
  double head_bytes = 0;             ///< whole model: final norm, logits, tokens, labels, losses
  double attention_bytes = 0;        ///< the attention operation's own tensors
  double attention_workspace_bytes = 0;  ///< cuDNN's backward workspace (twice dQ in FP32)
  double workspace_bytes = 0;        ///< cuBLASLt's and gpucmp's workspaces (decoder_training_options)
  double block_activation_bytes = 0; ///< one block's kept activations, its input included (no checkpointing)

  /// Activations kept and recomputed: what checkpointing trades.
  double activation_bytes() const noexcept { return kept_activation_bytes + recompute_bytes; }
  /// Everything.
  double total() const noexcept {
    return parameter_state_bytes + activation_bytes() + gradient_bytes + head_bytes + attention_bytes +
           attention_workspace_bytes + workspace_bytes;
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
  // A block's own: norm(x), Q K V, O, x + attention, its norm, gate | up, SwiGLU in BF16; two
  // 1/rms and a softmax statistic a head in FP32. Its input x is kept apart.
  const double own_token = 2.0 * (3 * h + (q + 2 * kv) + q + 3 * mlp) + 4.0 * (2 + double(model.heads));
  const double input_bytes = tokens * h * 2;
  plan.block_activation_bytes = tokens * own_token + input_bytes;
  plan.kept_activation_bytes = (blocks + 1) * input_bytes;  // each block's input, the last block's output
  if (options.checkpointing) {
    plan.recompute_bytes = tokens * own_token;
  } else {
    plan.kept_activation_bytes += blocks * tokens * own_token;
  }
  // QKV rows and d(QKV rows), dQ dK dV, dO, dSwiGLU, d(gate | up), d(normed), d(residual after
  // attention), d(residual); a block-scope step's output gradient beside them.
  plan.gradient_bytes = tokens * 2.0 * (3 * (q + 2 * kv) + q + 3 * mlp + 3 * h + (whole ? 0 : h));
  if (whole) {
    const double vocab = double(model.vocab_size);
    plan.head_bytes = tokens * (2.0 * h + 4.0 + 2.0 * vocab + 4 + 4 + 8);  // norm out, 1/rms, logits, ids, labels, losses
  }
  plan.attention_bytes = tokens * (2.0 * (4 * q + 4 * kv) + 4.0 * double(model.heads));
  plan.attention_workspace_bytes = 2 * tokens * q * 4;
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
