// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// `gpucmp-report fit`: whether a Llama-style decoder serves a batch at a context on each GPU
// of the spec database (models/decoder_memory.hpp): its weights, the KV cache's capacity in
// tokens beside them, and the largest batch at each context. The articles' "A100 for large
// language models, L40S for inference" as numbers: what each card's memory holds.
#pragma once

#include "format.hpp"
#include "model.hpp"

#include <gpucmp/models/decoder_memory.hpp>
#include <gpucmp/specs/specs.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_report {

/// What `fit` was asked.
struct fit_request {
  gpucmp::decoder_config model;
  gpucmp::decoder_memory_options options;
  std::vector<std::int64_t> contexts;  ///< tokens a sequence holds (prompt and generated)
  double reserve_bytes = 2.0 * 1073741824.0;
};

/// Tokens the KV cache can hold on `capacity` bytes beside the weights, one full step's
/// activations, one sequence's logits and the workspace; 0 when those alone do not fit.
inline double kv_capacity_tokens(const fit_request& r, double capacity) {
  const gpucmp::decoder_memory_plan one = gpucmp::plan_decoder_memory(r.model, 1, r.options.step_tokens, r.options);
  const double left = capacity - (one.total() - one.kv_cache_bytes);
  return left > 0 ? std::floor(left / one.kv_bytes_per_token) : 0;
}

/// The markdown table for `gpus`.
inline std::string render_fit_markdown(const fit_request& r, const std::vector<gpucmp::gpu_profile>& gpus) {
  const gpucmp::decoder_config& m = r.model;
  const gpucmp::decoder_memory_plan one = gpucmp::plan_decoder_memory(m, 1, 1, r.options);
  std::ostringstream md;
  md << "# " << m.name << " (" << number(double(m.parameters()) / 1e9) << " B parameters): what fits on each GPU\n\n";
  md << "Weights " << to_string(r.options.weights) << ": " << size_text(one.weight_bytes) << ". KV cache "
     << gpucmp::to_string(r.options.kv_cache) << ": " << size_text(one.kv_bytes_per_token) << " a token (K and V of all "
     << m.layers << " layers, " << m.kv_heads << " KV heads of " << m.head_dim << "), "
     << (r.options.page_tokens > 0 ? "in pages of " + std::to_string(r.options.page_tokens) + " tokens" : std::string("contiguous"))
     << ". Steps of at most " << r.options.step_tokens << " tokens; workspace " << size_text(r.options.workspace_bytes)
     << "; " << size_text(r.reserve_bytes) << " of each GPU kept for the CUDA context and libraries.\n\n";
  md << "| GPU | memory CUDA shows | usable | KV cache beside the weights |";
  for (std::int64_t c : r.contexts) md << " largest batch at " << c << " |";
  md << "\n|---|---|---|---|";
  for (std::size_t i = 0; i < r.contexts.size(); ++i) md << "---|";
  md << "\n";
  for (const gpucmp::gpu_profile& g : gpus) {
    const double usable = gpucmp::usable_memory_bytes(g, r.reserve_bytes);
    const double tokens = kv_capacity_tokens(r, usable);
    md << "| " << g.name << " | " << size_text(g.visible_memory_bytes) << " | " << size_text(usable) << " | "
       << (tokens > 0 ? count_text(tokens) + " tokens" : std::string("weights do not fit")) << " |";
    for (std::int64_t c : r.contexts) {
      if (c > m.max_positions) {
        md << " past the model's " << m.max_positions << " |";
        continue;
      }
      const std::int64_t batch = gpucmp::largest_decoder_batch(m, c, usable, r.options);
      md << " " << (batch > 0 ? std::to_string(batch) : std::string("does not fit")) << " |";
    }
    md << "\n";
  }
  md << "\nMemory CUDA shows is estimated from the datasheet: the figure sold, read as GiB, and 15/16 of it on GDDR "
        "boards, whose ECC is stored inline (gpucmp::visible_memory_estimate). Inference only: weights, KV cache, the "
        "largest step's buffers, each sequence's last logits (FP32) and the workspace (models/decoder_memory.hpp).\n";
  return md.str();
}

}  // namespace gpucmp_report
