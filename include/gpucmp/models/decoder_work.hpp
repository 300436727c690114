// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What one step of a Llama-style decoder must do, before it is timed: its FLOPs and the bytes
// it must move at least. A prefill step runs each sequence's prompt; a decode step one new
// token a sequence over the context cached so far.
//   FLOPs: the blocks' linear layers, 2 x their weights per token; attention's two GEMMs a
//     head, 4 x head_dim per (query, key) pair it sees (a prompt's causal square counted as
//     half, as the attention operation's default convention does); the LM head on each
//     sequence's last token only (serving needs no other logits).
//   Bytes: every weight a step uses, once (the linear layers in their recipe, the norms and
//     the LM head in 16 bits; of the embedding only the rows of the step's tokens); the K and
//     V it writes and those it reads (decode reads every cached token of every sequence); the
//     FP32 logits. Activations are not counted: a fused step keeps them on chip or in L2.
// The decode roofline follows: a step's tokens over its bytes at a copy bandwidth. A tied
// LM head reads the embedding matrix whole. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_memory.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/specs/work.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

/// The work of one decoder step.
struct decoder_step_work {
  double tokens = 0;           ///< tokens the step runs: the prompts' (prefill) or one a sequence (decode)
  double linear_flops = 0;     ///< the blocks' Q, K, V, O, gate, up and down projections
  double attention_flops = 0;  ///< Q K^T and P V over the keys each query sees
  double lm_head_flops = 0;    ///< the logits of each sequence's last token
  double weight_bytes = 0;     ///< the linear layers, norms and LM head, each read once
  double embedding_bytes = 0;  ///< the embedding rows of the step's tokens
  double kv_read_bytes = 0;    ///< cached K and V read by attention
  double kv_write_bytes = 0;   ///< the step's own K and V written to the cache
  double logits_bytes = 0;     ///< FP32 logits written

  /// Every FLOP of the step.
  double flops() const noexcept { return linear_flops + attention_flops + lm_head_flops; }
  /// Every byte the step must move.
  double bytes() const noexcept {
    return weight_bytes + embedding_bytes + kv_read_bytes + kv_write_bytes + logits_bytes;
  }
  /// As the engine's work of one step, its products at `arithmetic`'s rate (items: tokens).
  gpucmp::work as_work(precision arithmetic) const {
    gpucmp::work w;
    w.flops = flops();
    w.bytes_read = weight_bytes + embedding_bytes + kv_read_bytes;
    w.bytes_written = kv_write_bytes + logits_bytes;
    w.items = tokens;
    w.arithmetic = arithmetic;
    return w;
  }
};

namespace detail {

inline decoder_step_work decoder_step_common(const decoder_config& model, std::int64_t batch, double tokens,
                                             const decoder_memory_options& options, const char* what) {
  model.validate();
  options.validate();
  if (batch <= 0) throw invalid_argument(std::string(what) + ": batch must be positive, got " + std::to_string(batch));
  const double half = 2;  // the embedding, norms and LM head: 16 bits in every recipe
  const double linear = double(element_bytes(types_of(options.weights).weight));
  const bool fp8 = options.weights == numerics::fp8_e4m3;
  const double hidden = double(model.hidden_size), vocab = double(model.vocab_size);
  decoder_step_work w;
  w.tokens = tokens;
  w.linear_flops = 2.0 * double(model.layers) * double(model.block_linear_parameters()) * tokens;
  w.lm_head_flops = 2.0 * vocab * hidden * double(batch);
  w.weight_bytes = double(model.layers) * double(model.block_linear_parameters()) * linear +
                   (fp8 ? double(model.layers) * 7 * 4 : 0) + double(model.norm_parameters()) * half +
                   vocab * hidden * half;  // the LM head, or the embedding read whole when tied
  w.embedding_bytes = tokens * hidden * half;
  w.logits_bytes = double(batch) * vocab * 4;
  return w;
}

}  // namespace detail

/// One prefill step: `batch` prompts of `prompt` tokens each, causal, their K and V written to
/// the cache. Throws invalid_argument naming a bad model, batch, prompt or option.
inline decoder_step_work decoder_prefill_work(const decoder_config& model, std::int64_t batch, std::int64_t prompt,
                                              const decoder_memory_options& options = {}) {
  if (prompt <= 0) throw invalid_argument("decoder prefill: prompt must be positive, got " + std::to_string(prompt));
  decoder_step_work w = detail::decoder_step_common(model, batch, double(batch) * double(prompt), options, "decoder prefill");
  const double kv_token = plan_decoder_memory(model, 1, 1, options).kv_bytes_per_token;
  const double square = double(prompt) * double(prompt) / 2;  // causal, half the square
  w.attention_flops = 4.0 * double(model.layers) * double(model.heads) * double(model.head_dim) * square * double(batch);
  w.kv_write_bytes = kv_token * w.tokens;
  w.kv_read_bytes = kv_token * w.tokens;  // attention reads the prompt's own K and V at least once
  return w;
}

/// One decode step: `batch` sequences each adding one token to `context` tokens cached
/// before it (the new token attends over context + 1 keys). Throws invalid_argument naming a
/// bad model, batch, context or option.
inline decoder_step_work decoder_decode_work(const decoder_config& model, std::int64_t batch, std::int64_t context,
                                             const decoder_memory_options& options = {}) {
  if (context < 0) throw invalid_argument("decoder decode: context must be 0 or positive, got " + std::to_string(context));
  decoder_step_work w = detail::decoder_step_common(model, batch, double(batch), options, "decoder decode");
  const double kv_token = plan_decoder_memory(model, 1, 1, options).kv_bytes_per_token;
  const double keys = double(context) + 1;
  w.attention_flops = 4.0 * double(model.layers) * double(model.heads) * double(model.head_dim) * keys * double(batch);
  w.kv_write_bytes = kv_token * double(batch);
  w.kv_read_bytes = kv_token * double(context) * double(batch);  // the new token's own K and V stay on chip
  return w;
}

/// Tokens a second a step could reach if it moved only its bytes at `copy_bytes_per_second`
/// (the same run's copy rate): the decode roofline. Throws invalid_argument for a rate that is
/// not positive.
inline double roofline_tokens_per_second(const decoder_step_work& step, double copy_bytes_per_second) {
  if (!(copy_bytes_per_second > 0)) throw invalid_argument("roofline: the copy bandwidth must be positive");
  return step.tokens * copy_bytes_per_second / step.bytes();
}

}  // namespace gpucmp
