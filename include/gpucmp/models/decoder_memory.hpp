// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Whether a Llama-style decoder serves a batch of sequences of a given context on a GPU, before
// anything is allocated: its weights, its KV cache (every layer's K and V of every token of
// every sequence, in whole pages when paged), the largest step's activations, the logits and a
// workspace, against the memory a GPU of the spec database shows CUDA less a reserve. The
// answers a comparison asks for follow: the largest batch at a context, the longest context
// at a batch, the KV cache's capacity in tokens. Inference only; a training step's memory
// (activations kept for the backward pass, checkpointing) is the decoder's own plan.
// Host-only.
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/specs/specs.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace gpucmp {

/// The recipes a decoder's weights are stored in: BF16 or FP16 throughout, or FP8 E4M3 for the
/// blocks' linear layers (one FP32 scale each) with the embedding, the norms and the LM head
/// in BF16, as FP8 checkpoints of Llama keep them.
inline constexpr numerics decoder_weight_numerics[] = {numerics::bf16, numerics::fp16, numerics::fp8_e4m3};

/// How a decoder is served, for its memory plan.
struct decoder_memory_options {
  numerics weights = numerics::bf16;          ///< decoder_weight_numerics
  element_type kv_cache = element_type::bf16;  ///< K and V as cached: bf16, fp16, fp8_e4m3 or fp8_e5m2
  std::int64_t page_tokens = 0;  ///< paged cache: each sequence holds whole pages of this many tokens; 0: contiguous
  /// Tokens one forward step processes at most: a chunked prefill's chunk. A batch of prompts
  /// fills a step up to it; decode steps (one token a sequence) are smaller, so the plan holds
  /// for them too.
  std::int64_t step_tokens = 8192;
  double workspace_bytes = 64.0 * 1048576;  ///< cuBLASLt's 32 MiB and room for attention's

  /// Throws invalid_argument (unsupported for a recipe or cache type it does not take) naming
  /// the first bad field.
  void validate() const {
    require_numerics(weights, decoder_weight_numerics, "a decoder's weights");
    if (kv_cache != element_type::bf16 && kv_cache != element_type::fp16 && kv_cache != element_type::fp8_e4m3 &&
        kv_cache != element_type::fp8_e5m2) {
      throw unsupported(std::string("a KV cache of ") + to_string(kv_cache) + " (it takes bf16, fp16, fp8_e4m3, fp8_e5m2)");
    }
    if (page_tokens < 0) throw invalid_argument("page_tokens must be 0 (contiguous) or positive, got " + std::to_string(page_tokens));
    if (step_tokens <= 0) throw invalid_argument("step_tokens must be positive, got " + std::to_string(step_tokens));
    if (!(workspace_bytes >= 0) || !std::isfinite(workspace_bytes)) throw invalid_argument("workspace_bytes must be finite and >= 0");
  }
};

/// A decoder's memory at one batch and context, in bytes.
struct decoder_memory_plan {
  double weight_bytes = 0;      ///< every parameter in its stored type, FP8's scales included
  double kv_cache_bytes = 0;    ///< K and V of every layer, token and sequence (whole pages when paged)
  double activation_bytes = 0;  ///< the largest step's buffers, shared by the attention and MLP halves of a block
  double logits_bytes = 0;      ///< FP32 logits of each sequence's last token
  double workspace_bytes = 0;   ///< libraries' workspace
  double kv_bytes_per_token = 0;  ///< K and V of one token over every layer

  /// Everything.
  double total() const noexcept { return weight_bytes + kv_cache_bytes + activation_bytes + logits_bytes + workspace_bytes; }
};

/// The memory plan of `model` serving `batch` sequences of `context` tokens each (prompt and
/// generated together). Throws invalid_argument naming a bad model, batch, context or option.
inline decoder_memory_plan plan_decoder_memory(const decoder_config& model, std::int64_t batch, std::int64_t context,
                                               const decoder_memory_options& options = {}) {
  model.validate();
  options.validate();
  if (batch <= 0) throw invalid_argument("decoder memory: batch must be positive, got " + std::to_string(batch));
  if (context <= 0) throw invalid_argument("decoder memory: context must be positive, got " + std::to_string(context));
  const double half = 2;  // bytes of the activations, embedding, norms and LM head: BF16 or FP16 in every recipe
  const double linear = double(element_bytes(types_of(options.weights).weight));
  const bool fp8 = options.weights == numerics::fp8_e4m3;
  decoder_memory_plan plan;
  plan.weight_bytes = double(model.layers) * double(model.block_linear_parameters()) * linear +
                      (fp8 ? double(model.layers) * 7 * 4 : 0) +  // one FP32 scale a linear layer
                      double(model.embedding_parameters() + model.norm_parameters() + model.lm_head_parameters()) * half;
  plan.kv_bytes_per_token =
      2.0 * double(model.layers) * double(model.kv_heads) * double(model.head_dim) * double(element_bytes(options.kv_cache));
  const std::int64_t cached = options.page_tokens == 0 ? context
                                                       : (context + options.page_tokens - 1) / options.page_tokens * options.page_tokens;
  plan.kv_cache_bytes = plan.kv_bytes_per_token * double(cached) * double(batch);
  // A step: the residual stream and the normed input, then either Q/K/V and the attention's
  // output, or gate/up and SwiGLU's output.
  const double tokens = std::min(double(options.step_tokens), double(batch) * double(context));
  const double attention = double((model.heads + 2 * model.kv_heads) * model.head_dim + model.heads * model.head_dim);
  const double mlp = 3.0 * double(model.intermediate_size);
  plan.activation_bytes = tokens * (2.0 * double(model.hidden_size) + std::max(attention, mlp)) * half;
  plan.logits_bytes = double(batch) * double(model.vocab_size) * 4;
  plan.workspace_bytes = options.workspace_bytes;
  return plan;
}

/// Bytes a program may plan on `gpu`: what CUDA shows (gpu_profile::visible_memory_bytes) less
/// `reserve_bytes` for the CUDA context, the libraries' handles and the allocator's slack
/// (2 GiB by default). 0 when the GPU's memory is unknown.
inline double usable_memory_bytes(const gpu_profile& gpu, double reserve_bytes = 2.0 * 1073741824.0) {
  if (!std::isfinite(gpu.visible_memory_bytes)) return 0;
  return std::max(0.0, gpu.visible_memory_bytes - reserve_bytes);
}

namespace detail {

/// The largest n >= 1 for which fits(n) holds, fits being true up to some n and false past it;
/// 0 when fits(1) is false. Doubles, then bisects.
template <class Fits>
std::int64_t largest_fitting(Fits fits) {
  if (!fits(1)) return 0;
  std::int64_t low = 1, high = 2;  // fits(low), then grow high until it does not
  while (fits(high)) {
    low = high;
    if (high > (std::int64_t(1) << 40)) return low;  // memory no real GPU has
    high *= 2;
  }
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace detail

/// The largest batch of `context`-token sequences whose plan fits in `capacity_bytes`; 0 when
/// not even one does (the weights alone may not fit).
inline std::int64_t largest_decoder_batch(const decoder_config& model, std::int64_t context, double capacity_bytes,
                                          const decoder_memory_options& options = {}) {
  return detail::largest_fitting(
      [&](std::int64_t b) { return plan_decoder_memory(model, b, context, options).total() <= capacity_bytes; });
}

/// The longest context (at most the model's max_positions) `batch` sequences can each hold
/// in `capacity_bytes`; 0 when not even one token fits.
inline std::int64_t longest_decoder_context(const decoder_config& model, std::int64_t batch, double capacity_bytes,
                                            const decoder_memory_options& options = {}) {
  auto fits = [&](std::int64_t c) { return plan_decoder_memory(model, batch, c, options).total() <= capacity_bytes; };
  if (!fits(1)) return 0;
  if (fits(model.max_positions)) return model.max_positions;
  std::int64_t low = 1, high = model.max_positions;
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace gpucmp
