// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A Llama-style decoder on the GPU (models/decoder_config.hpp's geometry): prefill of a batch
// of prompts and decode steps of one token a sequence, in BF16 or FP16, against a KV cache that
// is contiguous (sequence b in row b) or paged (a pool of pages that sequence slots take as
// they grow and give back when their request ends: models/kv_pages.hpp), so that requests join
// and leave a running batch (step(), release(): continuous batching, serving/
// continuous_batching.hpp). Each step runs gpucmp's verified operations on the model's own tensors: the linear
// layers through gemv (cuBLASLt's algorithms, split-K variants and gpucmp's GEMV kernel, one
// verified search a shape), attention through cuDNN's SDPA (the cache as a padded batch: a
// prefill causal over its prompt, a decode step over each sequence's cached tokens), RMSNorm
// with the residual add fused (or, opted in, both inside gpucmp's GEMV kernel where a linear
// layer runs it), RoPE applied as Q, K and V leave the fused QKV rows for Q and the cache (or
// in place, then the split) and SwiGLU. Q, K and V come
// out of one fused QKV GEMM, gate and up out of one fused GEMM, as serving engines run them.
// Weights are random (seeded) or loaded from a Hugging Face checkpoint (decoder_weights.hpp).
// What a step shape needs (its operations searched and verified, its activations) is built
// the first time that shape runs, outside any timing. A step's sequence lengths and page table
// live on the device (decoder_kernels.cuh), so one captured CUDA graph per step shape serves
// every step of that shape: step() replays a decode step's graph, its batch padded up to a
// power of two (a bucket) as serving engines pad theirs.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_kernels.cuh>
#include <gpucmp/models/decoder_weights.hpp>
#include <gpucmp/models/kv_pages.hpp>
#include <gpucmp/models/step_buckets.hpp>
#include <gpucmp/ops/attention.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/gemv.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/rmsnorm.cuh>
#include <gpucmp/ops/rope.cuh>
#include <gpucmp/ops/swiglu.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gpucmp {

/// How a decoder is built.
struct decoder_options {
  numerics dtype = numerics::bf16;   ///< weights, activations and the KV cache: bf16 or fp16
  std::int64_t max_batch = 1;        ///< sequences (cache slots) a step may hold
  std::int64_t max_context = 2048;   ///< tokens a sequence's KV cache holds
  std::uint64_t seed = 1;            ///< the random weights'
  algorithm_choice choice = algorithm_choice::search;  ///< how each operation's algorithm is chosen
  /// The KV cache: 0, contiguous (max_batch x max_context tokens a layer); else paged, pages of
  /// page_size tokens (attention's paged layout) in a pool of kv_pages pages shared by the slots.
  std::int64_t page_size = 0;
  /// Paged: pages in the pool (what serving sizes to its memory); 0: room for max_batch
  /// sequences of max_context tokens.
  std::int64_t kv_pages = 0;
  /// step() replays each decode step shape's CUDA graph (captured on its first step) when its
  /// stream is not the legacy default stream; false: every kernel is launched.
  bool decode_graphs = true;
  /// A step's own kernels (gpucmp's GEMV and decode attention kernels, RMSNorm, RoPE, SwiGLU,
  /// the QKV split) may start while the kernel before each still runs (cuda/launch.hpp; sm_90+):
  /// a decode step is some 350 short kernels, and the gaps between them add up. false: serial.
  bool overlap_kernels = true;
  /// RoPE applied as Q, K and V leave the fused QKV rows (one kernel a layer, where a head's
  /// halves are whole 16-byte vectors) instead of the RoPE operation in place, then the split:
  /// the same bits, one launch a layer fewer (benchmarks/decoder --rope_split=off times the
  /// two kernels apart). false: RoPE, then the split.
  bool fuse_rope_split = true;
  /// RMSNorm and the residual add done inside gpucmp's GEMV kernel wherever a step's linear
  /// layers selected it (gemv_fusion): the add after the O and down projections, the norm
  /// before the QKV and gate-and-up projections and a decode step's LM head, none of them then
  /// a kernel of its own (two launches a layer fewer). The normalized activations are not
  /// rounded to BF16/FP16 before the product: one rounding fewer. Elsewhere, and when false,
  /// RMSNorm (with the add fused) is its own kernel. benchmarks/decoder --norm_fusion=on|off.
  /// Off by default: its first version, tested on an H100, made a batch-1 step 5.6 % slower
  /// (docs/results/h100-decoder.md); the version since has not run on a GPU yet.
  bool fuse_norm_into_gemv = false;
  /// With choice == search: whether each search ends in its sustained duel (search_options),
  /// which settles about 1 % at up to 2 s for each linear layer of a large step. false: what
  /// a serving warm-up over many step shapes can afford.
  bool sustained_duel = true;
};

/// A Llama-style decoder's inference on the current device.
class decoder {
 public:
  /// Validates `c` and `o` (invalid_argument; unsupported for another dtype), checks the
  /// weights and the KV cache fit in free memory (out_of_memory), allocates them and fills the
  /// weights with seeded random values: linear layers uniform in +-1/sqrt(fan-in), norms in
  /// [0.5, 1.5), the embedding in [-1, 1). A paged cache holds one page more than kv_pages: the
  /// page a step's padding sequences write to.
  decoder(const decoder_config& c, const decoder_options& o = {}, cudaStream_t stream = nullptr)
      : m_config((c.validate(), c)), m_options(o) {
    if (o.dtype != numerics::bf16 && o.dtype != numerics::fp16) {
      throw unsupported(std::string("decoder: ") + to_string(o.dtype) + " is not built (bf16 or fp16)");
    }
    if (o.max_batch < 1 || o.max_context < 1) throw invalid_argument("decoder: max_batch and max_context must be positive");
    if (o.page_size < 0 || o.kv_pages < 0 || (o.page_size == 0 && o.kv_pages > 0)) {
      throw invalid_argument("decoder: page_size and kv_pages must not be negative, and kv_pages needs a page_size");
    }
    if (o.max_context > c.max_positions) {
      throw invalid_argument("decoder " + c.name + ": max_context " + std::to_string(o.max_context) +
                             " is past the model's " + std::to_string(c.max_positions) + " positions");
    }
    if ((c.hidden_size * element_size()) % 16 != 0 || (c.head_dim * element_size()) % 16 != 0) {
      throw unsupported("decoder " + c.name + ": hidden_size and head_dim must be whole 16-byte vectors");
    }
    const double needed = weight_bytes() + cache_bytes();
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, "decoder " + c.name);
    allocate_weights(stream);
    if (paged()) {
      const std::size_t page_bytes = std::size_t(2 * c.layers * o.page_size * c.kv_heads * c.head_dim) * element_size();
      m_pages.emplace(pool_pages(), o.page_size, o.max_batch, o.max_context, page_bytes);
    }
    m_lengths.assign(std::size_t(o.max_batch), 0);
    const std::size_t cache = std::size_t(cache_tokens() * c.kv_heads * c.head_dim) * element_size();
    // Zeros, not poison: cuDNN multiplies a masked key's probability (0) by its V row, and 0 x NaN
    // is NaN, so positions no step has written yet must hold finite values.
    for (std::int64_t l = 0; l < c.layers; ++l) {
      m_k_cache.emplace_back(cache, initial_fill::uninitialized());
      m_v_cache.emplace_back(cache, initial_fill::uninitialized());
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_k_cache.back().data(), 0, cache, stream));
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_v_cache.back().data(), 0, cache, stream));
    }
    rope_problem table_rows = rope_of(1);
    const std::vector<float2> table = rope_table(table_rows);
    m_rope_table = device_buffer<float>(2 * table.size(), initial_fill::uninitialized());  // (cos, sin) pairs
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_rope_table.data(), table.data(), m_rope_table.bytes(), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  /// Replaces the weights with `checkpoint`'s, after checking it holds exactly what the
  /// configuration needs (weight_error naming the file and the tensor); F32, F16 and BF16
  /// values are rounded to the decoder's type.
  void load(const decoder_checkpoint& checkpoint, cudaStream_t stream = nullptr) {
    checkpoint.validate(m_config);
    for (const decoder_tensor& t : decoder_checkpoint_tensors(m_config)) {
      const std::vector<float> values = checkpoint.read_float(t.name, t.shape);
      visit_storage([&](auto zero) {
        using T = decltype(zero);
        std::vector<T> stored(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) stored[i] = from_double<T>(double(values[i]));
        GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_tensors.at(t.name), stored.data(), stored.size() * sizeof(T),
                                          cudaMemcpyHostToDevice, stream));
        GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `stored` goes at the end of this scope
      });
    }
  }

  /// Runs the prompts `tokens` (batch x prompt ids, row-major, each in [0, vocab)) in slots 0
  /// to batch - 1: writes the KV cache's positions 0 to prompt - 1 of those sequences and each
  /// one's logits after its last token (logits()). Throws invalid_argument for a bad id or a
  /// batch or prompt past the options, out_of_memory when a paged pool has too few pages.
  void prefill(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t prompt, cudaStream_t stream = nullptr) {
    check_shape(batch, prompt, 0);
    check_tokens(tokens, batch * prompt);
    step_plan& plan = plan_for(batch, prompt, false, stream);
    upload_tokens(plan, tokens, batch * prompt, stream);
    run_uniform(plan, 0, stream);
  }

  /// One decode step: token `tokens[b]` of each sequence b (slots 0 to batch - 1) at position
  /// `context` (each sequence holding `context` cached tokens), appended to the cache; logits()
  /// become the next token's. Throws invalid_argument for a bad id or a full cache.
  void decode(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t context, cudaStream_t stream = nullptr) {
    check_shape(batch, 1, context);
    check_tokens(tokens, batch);
    step_plan& plan = plan_for(batch, 1, true, stream);
    upload_tokens(plan, tokens, batch, stream);
    run_uniform(plan, context, stream);
  }

  /// Serving (continuous batching): one step over the sequence slots `slots` (0 to max_batch -
  /// 1, each at most once), slot slots[i] taking tokens[i]: a whole prompt into an empty slot
  /// (a prefill step: every slot empty), or one token after what the slot holds (a decode step:
  /// no slot empty). Each slot's length grows by its tokens; rows 0 to slots.size() - 1 of
  /// logits() are each sequence's next-token logits. The step runs on the shape it pads up to
  /// (models/step_buckets.hpp: a paged cache's batch to a power of two; a prefill's longest
  /// prompt to a power of two or 1.5 times one), a decode step as its shape's CUDA graph. A
  /// contiguous cache keeps sequence b in row b, so a step there takes slots 0, 1, ... in order.
  /// Throws invalid_argument for a mix of prefill and decode, a bad slot or id, a sequence past
  /// max_context; out_of_memory when the pool lacks the pages the step needs (nothing run).
  void step(const std::vector<std::int64_t>& slots, const std::vector<std::vector<std::int32_t>>& tokens,
            cudaStream_t stream = nullptr) {
    const std::int64_t n = std::int64_t(slots.size());
    if (n < 1 || n > m_options.max_batch || tokens.size() != slots.size()) {
      throw invalid_argument("decoder::step: " + std::to_string(n) + " slots and " + std::to_string(tokens.size()) +
                             " token lists (1 to " + std::to_string(m_options.max_batch) + " sequences, a list each)");
    }
    const bool prefill_step = length(slots[0]) == 0;
    std::int64_t longest = 0;
    std::vector<bool> seen(std::size_t(m_options.max_batch), false);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t slot = slots[std::size_t(i)], held = length(slot), q = std::int64_t(tokens[std::size_t(i)].size());
      const std::string which = "decoder::step: slot " + std::to_string(slot);
      if (seen[std::size_t(slot)]) throw invalid_argument(which + " appears twice");
      seen[std::size_t(slot)] = true;
      if (!paged() && slot != i) {
        throw invalid_argument(which + " at place " + std::to_string(i) +
                               ": a contiguous cache's steps take slots 0, 1, ... in order (a paged cache takes any)");
      }
      if ((held == 0) != prefill_step) throw invalid_argument(which + ": a step is all prefills (empty slots) or all decodes");
      if (q < 1 || (!prefill_step && q != 1)) {
        throw invalid_argument(which + " takes " + std::to_string(q) + " tokens (a prompt of 1 or more; a decode step 1)");
      }
      if (held + q > m_options.max_context) {
        throw invalid_argument(which + " would hold " + std::to_string(held + q) + " tokens, past max_context " +
                               std::to_string(m_options.max_context));
      }
      check_tokens(tokens[std::size_t(i)], q);
      longest = std::max(longest, q);
    }
    const std::int64_t batch = paged() ? batch_bucket(n, m_options.max_batch) : n;
    const std::int64_t per_sequence = prefill_step ? token_bucket(longest, m_options.max_context) : 1;
    step_plan& plan = plan_for(batch, per_sequence, !prefill_step, stream);
    if (paged()) reserve_step_pages(slots, tokens);  // the last thing that may throw
    // The step on the host: ids (a padded row: id 0), lengths and page table rows (a padded
    // sequence: one token on the scratch page), then one upload each.
    std::vector<std::int32_t> ids(std::size_t(batch * per_sequence), 0);
    std::vector<std::int32_t> meta(plan.meta.size(), 0);
    const std::int64_t pps = pages_per_sequence();
    for (std::int64_t b = 0; b < batch; ++b) {
      const bool real = b < n;
      const std::int64_t held = real ? length(slots[std::size_t(b)]) : 0;
      const std::int64_t q = real ? std::int64_t(tokens[std::size_t(b)].size()) : 1;
      if (real) std::copy(tokens[std::size_t(b)].begin(), tokens[std::size_t(b)].end(), ids.begin() + b * per_sequence);
      meta[std::size_t(b)] = std::int32_t(q);
      meta[std::size_t(batch + b)] = std::int32_t(held + q);
      meta[std::size_t(2 * batch + b)] = std::int32_t(held);
      for (std::int64_t j = 0; j < pps; ++j) {
        meta[std::size_t(3 * batch + b * pps + j)] =
            real ? m_pages->table()[std::size_t(slots[std::size_t(b)] * pps + j)] : std::int32_t(scratch_page());
      }
    }
    upload(plan.tokens.data(), ids, stream);
    upload(plan.meta.data(), meta, stream);
    plan.uniform_generation = 0;  // the table is this step's, not run_uniform()'s
    if (!prefill_step && m_options.decode_graphs && stream != nullptr) {
      replay(plan, stream);
    } else {
      run(plan, stream);
    }
    m_last = &plan;
    for (std::int64_t i = 0; i < n; ++i) {
      m_lengths[std::size_t(slots[std::size_t(i)])] += std::int64_t(tokens[std::size_t(i)].size());
    }
  }

  /// Ends the sequence in `slot`: its length becomes 0 and a paged cache's pages go back to the
  /// pool. Throws invalid_argument for a bad slot.
  void release(std::int64_t slot) {
    (void)length(slot);
    m_lengths[std::size_t(slot)] = 0;
    if (paged()) {
      m_pages->release(slot);
      if (m_pages->take_changed()) ++m_page_generation;
    }
  }

  /// Tokens the sequence in `slot` holds (0: empty). Throws invalid_argument for a bad slot.
  std::int64_t length(std::int64_t slot) const {
    if (slot < 0 || slot >= m_options.max_batch) {
      throw invalid_argument("decoder: no slot " + std::to_string(slot) + " (0 to " + std::to_string(m_options.max_batch - 1) +
                             ")");
    }
    return m_lengths[std::size_t(slot)];
  }

  /// A paged cache's pages and who holds them; null for a contiguous cache.
  const kv_pages* pages() const noexcept { return m_pages ? &*m_pages : nullptr; }

  /// Prepares the step of `batch` sequences of `tokens` new tokens each (a prefill, or a decode
  /// step with tokens = 1): its operations searched and verified, its activations allocated and
  /// its token ids set to a fixed spread of the vocabulary, so that a timed step builds nothing.
  void prepare(std::int64_t batch, std::int64_t tokens, bool decode_step, cudaStream_t stream = nullptr) {
    check_shape(batch, tokens, 0);
    step_plan& plan = plan_for(batch, tokens, decode_step, stream);
    std::vector<std::int32_t> ids(std::size_t(batch * tokens));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t((i * 7919 + 1) % std::size_t(m_config.vocab_size));
    upload_tokens(plan, ids, batch * tokens, stream);
  }

  /// Enqueues a prepared step on the ids it last took, in slots 0 to batch - 1: a prefill
  /// (start 0) or a decode step after `context` cached tokens. No host work waits on the GPU,
  /// so a benchmark times it in any mode, CUDA graphs included, once it has run outside a graph
  /// with a paged cache's pages in place (a step that must upload its page table while its
  /// stream captures throws invalid_argument). Throws invalid_argument for a step never
  /// prepared or a context past the cache.
  void run_prepared(std::int64_t batch, std::int64_t tokens, bool decode_step, std::int64_t context, cudaStream_t stream) {
    check_shape(batch, tokens, decode_step ? context : 0);
    const auto at = m_plans.find({batch, tokens, decode_step});
    if (at == m_plans.end()) throw invalid_argument("decoder: run_prepared of a step never prepared");
    run_uniform(*at->second, decode_step ? context : 0, stream);
  }

  /// The logits of the last step, a row of vocab_size a sequence in the decoder's type
  /// (row-major): batch rows, or step()'s sequences in its order (then its padding's).
  const void* logits() const {
    if (m_last == nullptr) throw invalid_argument("decoder: no step has run, so there are no logits");
    return m_last->logits.data();
  }
  /// The device copy of checkpoint tensor `name` (Hugging Face's name), in the decoder's type;
  /// Q, K and V (gate and up) are parts of one fused matrix. Throws invalid_argument otherwise.
  const void* tensor(const std::string& name) const {
    const auto at = m_tensors.find(name);
    if (at == m_tensors.end()) throw invalid_argument("decoder " + m_config.name + ": no tensor '" + name + "'");
    return at->second;
  }
  const decoder_config& config() const noexcept { return m_config; }  ///< its geometry
  const decoder_options& options() const noexcept { return m_options; }  ///< how it was built
  std::size_t element_size() const noexcept { return element_bytes(types_of(m_options.dtype).output); }
  /// Bytes of its weights (the LM head once when tied).
  double weight_bytes() const noexcept { return double(m_config.parameters()) * double(element_size()); }
  /// Bytes of its KV cache: K and V of every layer, max_batch x max_context tokens (paged: the
  /// pool's pages and the scratch page).
  double cache_bytes() const noexcept {
    return 2.0 * double(m_config.layers) * double(cache_tokens()) * double(m_config.kv_heads * m_config.head_dim) *
           double(element_size());
  }
  /// The algorithms a prepared step runs: "qkv: cuBLASLt ..." a line per operation.
  std::vector<std::string> algorithms(std::int64_t batch, std::int64_t tokens, bool decode_step) const {
    const auto at = m_plans.find({batch, tokens, decode_step});
    if (at == m_plans.end()) throw invalid_argument("decoder: that step was never prepared");
    const step_plan& p = *at->second;
    std::vector<std::string> out;
    for (const auto& [label, op] : {std::pair<const char*, const std::optional<gemv>*>{"qkv", &p.qkv}, {"o", &p.o},
                                    {"gate_up", &p.gate_up}, {"down", &p.down}, {"lm_head", &p.lm_head}}) {
      out.push_back(std::string(label) + ": " + (*op)->algorithm().describe());
    }
    out.push_back("attention: " + p.attend->algorithm().describe());
    const std::string fused = p.fusion.describe();
    if (!fused.empty()) out.push_back("in gpucmp's GEMV kernel: " + fused);
    return out;
  }

 private:
  // A layer's weights: Q, K and V fused into one matrix (rows q, then k, then v), gate and up
  // into one (rows gate, then up), as the step's GEMMs read them.
  struct layer_weights {
    device_buffer<std::uint8_t> norm1, qkv, o, norm2, gate_up, down;
  };

  // What a step runs inside gpucmp's GEMV kernel (decoder_options::fuse_norm_into_gemv), the
  // same in every layer. A norm goes into its GEMV only where no product waits in `branch`:
  // after the embedding or a projection that added itself to the residual.
  struct norm_fusion {
    bool o_adds = false, down_adds = false;                              // residual += the product
    bool qkv_norms = false, gate_up_norms = false, head_norms = false;  // RMSNorm of the residual first
    std::string describe() const {
      std::string norms, adds;
      for (const auto& [on, name] : {std::pair<bool, const char*>{qkv_norms, "qkv"}, {gate_up_norms, "gate_up"}, {head_norms, "lm_head"}}) {
        if (on) norms += (norms.empty() ? "" : ", ") + std::string(name);
      }
      for (const auto& [on, name] : {std::pair<bool, const char*>{o_adds, "o"}, {down_adds, "down"}}) {
        if (on) adds += (adds.empty() ? "" : ", ") + std::string(name);
      }
      std::string out = norms.empty() ? "" : "RMSNorm before " + norms;
      if (!adds.empty()) out += (out.empty() ? "" : "; ") + std::string("residual add after ") + adds;
      return out;
    }
  };

  // Everything one step shape runs with.
  struct step_plan {
    std::int64_t batch = 0, per_sequence = 0;  // sequences, new tokens each (at most: padded)
    bool decode = false;
    std::optional<gemv> qkv, o, gate_up, down, lm_head;
    norm_fusion fusion;
    std::optional<gpucmp::attention> attend;
    std::vector<attention_binding> attend_layers;  // each layer's Q, cache and output, bound once
    rmsnorm_problem norm, fused_norm;
    launch_shape norm_shape, fused_norm_shape, rope_shape, swiglu_shape;
    rope_problem rope;
    swiglu_problem swiglu;
    device_buffer<std::uint8_t> residual, normed, qkv_rows, q, attended, branch, gate_up_rows, act, last, logits;
    device_buffer<std::int32_t> tokens, positions;
    device_buffer<std::int32_t> meta;  // decoder_step_lengths (3 x batch), then the step's page table rows
    std::uint64_t uniform_generation = 0;  // the page generation run_uniform() uploaded the table at; 0: none
    std::optional<gpucmp::graph> captured;  // step()'s decode graph, once captured
    std::optional<graph_exec> replay;
    decoder_step_lengths lengths() { return {meta.data(), batch}; }
    std::int32_t* page_table() { return meta.data() + 3 * batch; }
  };

  // Calls f(T{}) with the element type it stores: bf16 or fp16 only (visit_floating_storage
  // would also instantiate every kernel for float, a type the constructor refuses).
  template <class F>
  void visit_storage(F&& f) const {
    if (m_options.dtype == numerics::fp16) {
      f(__half{});
    } else {
      f(__nv_bfloat16{});
    }
  }

  std::int64_t tokens_of(const step_plan& p) const noexcept { return p.batch * p.per_sequence; }
  bool paged() const noexcept { return m_options.page_size > 0; }
  std::int64_t pages_per_sequence() const noexcept {
    return paged() ? (m_options.max_context + m_options.page_size - 1) / m_options.page_size : 0;
  }
  // The pool's pages handed out to slots (kv_pages); the scratch page comes after them.
  std::int64_t pool_pages() const noexcept {
    return m_options.kv_pages > 0 ? m_options.kv_pages : m_options.max_batch * pages_per_sequence();
  }
  std::int64_t scratch_page() const noexcept { return pool_pages(); }
  // Tokens a layer's K (and V) cache holds.
  std::int64_t cache_tokens() const noexcept {
    return paged() ? (pool_pages() + 1) * m_options.page_size : m_options.max_batch * m_options.max_context;
  }

  // A host vector into a device buffer, in stream order; the vector may go when this returns
  // (a copy from pageable memory is staged before it returns).
  static void upload(std::int32_t* device, const std::vector<std::int32_t>& host, cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
  }

  // The pages step() needs, all or none: the pool's free pages are checked against the sum
  // first, so a step that does not fit takes nothing.
  void reserve_step_pages(const std::vector<std::int64_t>& slots, const std::vector<std::vector<std::int32_t>>& tokens) {
    const std::int64_t ps = m_options.page_size;
    std::int64_t needed = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const std::int64_t after = length(slots[i]) + std::int64_t(tokens[i].size());
      needed += std::max<std::int64_t>(0, (after + ps - 1) / ps - m_pages->held(slots[i]));
    }
    if (needed > m_pages->free_pages()) {
      const std::size_t page = std::size_t(2 * m_config.layers * ps * m_config.kv_heads * m_config.head_dim) * element_size();
      throw out_of_memory(std::size_t(needed) * page, std::size_t(m_pages->free_pages()) * page, std::size_t(pool_pages()) * page,
                          "decoder " + m_config.name + "'s KV cache: the step of " + std::to_string(slots.size()) +
                              " sequences needs " + std::to_string(needed) + " more pages of " + std::to_string(ps) +
                              " tokens, " + std::to_string(m_pages->free_pages()) + " of " + std::to_string(pool_pages()) +
                              " are free");
    }
    for (std::size_t i = 0; i < slots.size(); ++i) m_pages->reserve(slots[i], length(slots[i]) + std::int64_t(tokens[i].size()));
    if (m_pages->take_changed()) ++m_page_generation;
  }

  // A uniform step (prefill(), decode(), run_prepared()): slots 0 to batch - 1 each take
  // per_sequence tokens after `start`, the lengths set on the device. A paged cache's slots
  // take their pages first, and the plan's copy of their table rows is uploaded when it is not
  // current (never inside a capture: that throws).
  void run_uniform(step_plan& p, std::int64_t start, cudaStream_t stream) {
    if (paged()) {
      for (std::int64_t b = 0; b < p.batch; ++b) m_pages->reserve(b, start + p.per_sequence);
      if (m_pages->take_changed()) ++m_page_generation;
      if (p.uniform_generation != m_page_generation) {
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        GPUCMP_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
        if (capture != cudaStreamCaptureStatusNone) {
          throw invalid_argument(
              "decoder: the step's page table changed since it last ran; run it once outside a CUDA graph first");
        }
        const std::vector<std::int32_t>& table = m_pages->table();
        upload(p.page_table(), std::vector<std::int32_t>(table.begin(), table.begin() + p.batch * pages_per_sequence()), stream);
        p.uniform_generation = m_page_generation;
      }
    }
    fill_uniform_lengths(p.lengths(), p.per_sequence, start, stream);
    for (std::int64_t b = 0; b < p.batch; ++b) m_lengths[std::size_t(b)] = start + p.per_sequence;
    run(p, stream);
    m_last = &p;
  }

  // step()'s decode: the plan's CUDA graph, captured on its first step (its lengths and table
  // are read from the device, so every later step replays it).
  void replay(step_plan& p, cudaStream_t stream) {
    if (!p.replay) {
      p.captured.emplace(capture_graph(stream, [&](cudaStream_t s) { run(p, s); }));
      p.replay.emplace(p.captured->get());
    }
    p.replay->launch(stream);
  }
  std::int64_t qkv_row() const noexcept { return (m_config.heads + 2 * m_config.kv_heads) * m_config.head_dim; }

  rope_problem rope_of(std::int64_t tokens) const {
    return decoder_rope(m_config, tokens, m_options.dtype, m_options.max_context);
  }

  void check_shape(std::int64_t batch, std::int64_t tokens, std::int64_t context) const {
    if (batch < 1 || batch > m_options.max_batch) {
      throw invalid_argument("decoder: batch " + std::to_string(batch) + " is outside 1.." + std::to_string(m_options.max_batch));
    }
    if (tokens < 1 || context < 0 || context + tokens > m_options.max_context) {
      throw invalid_argument("decoder: " + std::to_string(tokens) + " new tokens after " + std::to_string(context) +
                             " cached do not fit a cache of " + std::to_string(m_options.max_context));
    }
  }

  // Before anything is built for the step: the count and every id.
  void check_tokens(const std::vector<std::int32_t>& tokens, std::int64_t count) const {
    if (std::int64_t(tokens.size()) != count) {
      throw invalid_argument("decoder: " + std::to_string(tokens.size()) + " token ids for a step of " + std::to_string(count));
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= m_config.vocab_size) {
        throw invalid_argument("decoder: token " + std::to_string(i) + " is id " + std::to_string(tokens[i]) +
                               ", outside the vocabulary of " + std::to_string(m_config.vocab_size));
      }
    }
  }

  void upload_tokens(step_plan& plan, const std::vector<std::int32_t>& tokens, std::int64_t count, cudaStream_t stream) {
    check_tokens(tokens, count);
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(plan.tokens.data(), tokens.data(), tokens.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may go
  }

  void allocate_weights(cudaStream_t stream) {
    const decoder_config& c = m_config;
    const std::size_t e = element_size();
    const std::int64_t h = c.hidden_size, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim, m = c.intermediate_size;
    std::uint64_t seed = m_options.seed * 1000003;
    auto filled = [&](std::int64_t elements, double low, double high) {
      device_buffer<std::uint8_t> b(std::size_t(elements) * e, initial_fill::uninitialized());
      visit_storage([&](auto zero) {
        using T = decltype(zero);
        fill_uniform(reinterpret_cast<T*>(b.data()), std::size_t(elements), ++seed, low, high, stream);
      });
      return b;
    };
    auto linear = [&](std::int64_t out, std::int64_t in) {
      const double a = 1 / std::sqrt(double(in));
      return filled(out * in, -a, a);
    };
    m_embedding = filled(c.vocab_size * h, -1, 1);
    m_tensors["model.embed_tokens.weight"] = m_embedding.data();
    for (std::int64_t i = 0; i < c.layers; ++i) {
      layer_weights w{filled(h, 0.5, 1.5), linear(q + 2 * kv, h), linear(h, q), filled(h, 0.5, 1.5), linear(2 * m, h), linear(h, m)};
      const std::string l = "model.layers." + std::to_string(i) + ".";
      m_tensors[l + "input_layernorm.weight"] = w.norm1.data();
      m_tensors[l + "self_attn.q_proj.weight"] = w.qkv.data();
      m_tensors[l + "self_attn.k_proj.weight"] = w.qkv.data() + std::size_t(q * h) * e;
      m_tensors[l + "self_attn.v_proj.weight"] = w.qkv.data() + std::size_t((q + kv) * h) * e;
      m_tensors[l + "self_attn.o_proj.weight"] = w.o.data();
      m_tensors[l + "post_attention_layernorm.weight"] = w.norm2.data();
      m_tensors[l + "mlp.gate_proj.weight"] = w.gate_up.data();
      m_tensors[l + "mlp.up_proj.weight"] = w.gate_up.data() + std::size_t(m * h) * e;
      m_tensors[l + "mlp.down_proj.weight"] = w.down.data();
      m_layers.push_back(std::move(w));
    }
    m_final_norm = filled(h, 0.5, 1.5);
    m_tensors["model.norm.weight"] = m_final_norm.data();
    if (!c.tied_embeddings) {
      m_lm_head = linear(c.vocab_size, h);
      m_tensors["lm_head.weight"] = m_lm_head.data();
    }
  }
  launch_order overlap_order() const noexcept {
    return m_options.overlap_kernels ? launch_order::overlapped : launch_order::serial;
  }
  const void* lm_head_weights() const noexcept {
    return m_config.tied_embeddings ? m_embedding.data() : m_lm_head.data();
  }

  // Builds (once) what a step of `batch` x `tokens` new tokens runs: each linear layer's gemv
  // and the attention searched and verified on their own tensors, the elementwise kernels'
  // first launch shapes, the activations.
  step_plan& plan_for(std::int64_t batch, std::int64_t tokens, bool decode_step, cudaStream_t stream) {
    const auto key = std::make_tuple(batch, tokens, decode_step);
    auto& slot = m_plans[key];
    if (slot) return *slot;
    auto plan = std::make_unique<step_plan>();
    step_plan& p = *plan;
    const decoder_config& c = m_config;
    const std::int64_t t = batch * tokens, h = c.hidden_size, m = c.intermediate_size;
    const std::int64_t q = c.heads * c.head_dim, e = std::int64_t(element_size());
    p.batch = batch;
    p.per_sequence = tokens;
    p.decode = decode_step;
    const launch_order order = overlap_order();
    gemv_options linear_options;
    linear_options.choice = m_options.choice;
    if (!m_options.sustained_duel) linear_options.search.duel_contenders = 0;
    // A linear layer of a problem an earlier step shape searched (a decode step and a one-token
    // prefill of the same batch share all five) takes that search's verdict, verified again here.
    auto linear = [&](std::optional<gemv>& op, std::int64_t rows, std::int64_t out, std::int64_t in) {
      const gemv_problem problem{rows, out, in, m_options.dtype};
      const auto searched = m_linear_searches.find(problem.name());
      gemv_options settings = linear_options;
      if (searched != m_linear_searches.end()) settings.choice = algorithm_choice::heuristic;
      op.emplace(problem, settings, stream);
      // Searched as the step launches it: gpucmp's kernel, overlapped, streams its first weights
      // while the launch before it drains, which a serial search would not credit it with.
      op->set_launch_order(order);
      if (searched != m_linear_searches.end()) op->adopt_search(searched->second.first, searched->second.second);
      const prepared_operation prepared = prepare_verified(*op);
      if (prepared.search) m_linear_searches[problem.name()] = {*prepared.search, op->search_log()};
    };
    linear(p.qkv, t, qkv_row(), h);
    linear(p.o, t, h, q);
    linear(p.gate_up, t, 2 * m, h);
    linear(p.down, t, h, m);
    linear(p.lm_head, batch, c.vocab_size, h);
    if (m_options.fuse_norm_into_gemv) {
      norm_fusion& f = p.fusion;
      f.o_adds = p.o->kernel_selected();
      f.down_adds = p.down->kernel_selected();
      f.qkv_norms = f.down_adds && p.qkv->kernel_selected();  // layer 0's norm follows the embedding
      f.gate_up_norms = f.o_adds && p.gate_up->kernel_selected();
      f.head_norms = decode_step && f.down_adds && p.lm_head->kernel_selected();  // a prefill gathers normed rows
    }
    attention_problem a;
    a.batch = batch;
    a.q_heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.head_dim = c.head_dim;
    a.seq_q = tokens;
    a.seq_kv = m_options.max_context;  // the cache, a padded batch
    a.dtype = m_options.dtype;
    a.mask = decode_step ? attention_mask::none : attention_mask::causal;
    a.kv_lengths.assign(std::size_t(batch), decode_step ? m_options.max_context : tokens);
    if (paged()) {
      a.page_size = m_options.page_size;
      a.page_pool = pool_pages() + 1;  // the scratch page too
    }
    attention_options attention_settings;
    attention_settings.choice = m_options.choice;
    if (!m_options.sustained_duel) attention_settings.search.duel_contenders = 0;
    p.attend.emplace(a, attention_settings, stream);
    prepare_verified(*p.attend);
    p.norm = rmsnorm_problem{t, h, m_options.dtype, c.norm_eps, false};
    p.fused_norm = rmsnorm_problem{t, h, m_options.dtype, c.norm_eps, true};
    p.norm_shape = rmsnorm_shapes(p.norm).at(0);
    p.fused_norm_shape = rmsnorm_shapes(p.fused_norm).at(0);
    p.rope = rope_of(t);
    p.rope_shape = rope_shapes(p.rope).at(0);
    p.swiglu = swiglu_problem{t, m, m_options.dtype};
    p.swiglu_shape = swiglu_shapes(p.swiglu).at(0);
    for (launch_shape* shape : {&p.norm_shape, &p.fused_norm_shape, &p.rope_shape, &p.swiglu_shape}) shape->order = order;
    auto rows = [&](std::int64_t count, std::int64_t width) {
      return device_buffer<std::uint8_t>(std::size_t(count * width * e), initial_fill::poison());
    };
    p.residual = rows(t, h);
    p.normed = rows(t, h);
    p.qkv_rows = rows(t, qkv_row());
    p.q = rows(t, q);
    p.attended = rows(t, q);
    p.branch = rows(t, h);
    p.gate_up_rows = rows(t, 2 * m);
    p.act = rows(t, m);
    p.last = rows(batch, h);
    p.logits = rows(batch, c.vocab_size);
    p.tokens = device_buffer<std::int32_t>(std::size_t(t), initial_fill::poison());
    p.positions = device_buffer<std::int32_t>(std::size_t(t), initial_fill::poison());
    p.meta = device_buffer<std::int32_t>(std::size_t(3 * batch + batch * pages_per_sequence()), initial_fill::poison());
    for (std::size_t l = 0; l < m_layers.size(); ++l) {
      attention_tensors at{p.q.data(), m_k_cache[l].data(), m_v_cache[l].data(), p.attended.data()};
      at.seq_lengths = p.meta.data();  // the step's, set on the device before it runs (q then kv)
      if (paged()) at.page_table = p.page_table();
      p.attend_layers.push_back(p.attend->bind(at));
    }
    slot = std::move(plan);
    return *slot;
  }

  // One step on the ids and lengths the plan holds on the device.
  void run(step_plan& p, cudaStream_t stream) {
    const decoder_config& c = m_config;
    const std::int64_t t = tokens_of(p), h = c.hidden_size, e = std::int64_t(element_size());
    kv_cache_layout cache{nullptr, m_options.max_context, m_options.page_size, pages_per_sequence(), c.kv_heads};
    if (paged()) cache.table = p.page_table();
    const qkv_split split{c.heads * c.head_dim * e, c.head_dim * e, cache};
    embed_tokens(p.residual.data(), m_embedding.data(), p.tokens.data(), t, h * e, stream);
    fill_positions(p.positions.data(), t, p.per_sequence, p.lengths(), stream);
    visit_storage([&](auto zero) {
      using T = decltype(zero);
      auto as = [](device_buffer<std::uint8_t>& b) { return reinterpret_cast<T*>(b.data()); };
      // normed = norm(r) with `weight`; fused: r += branch first.
      auto norm = [&](const device_buffer<std::uint8_t>& weight, bool fused) {
        rmsnorm_tensors<T> n;
        n.weight = reinterpret_cast<const T*>(weight.data());
        n.y = as(p.normed);
        if (fused) {
          n.x = as(p.branch);
          n.residual = as(p.residual);
          n.residual_out = as(p.residual);
          run_rmsnorm(p.fused_norm, p.fused_norm_shape, n, stream);
        } else {
          n.x = as(p.residual);
          run_rmsnorm(p.norm, p.norm_shape, n, stream);
        }
      };
      const float2* table = reinterpret_cast<const float2*>(m_rope_table.data());
      const bool rope_in_split = m_options.fuse_rope_split && rope_split_applies(p.rope, e);
      const norm_fusion& f = p.fusion;
      bool pending = false;  // `branch` holds a product not yet added to the residual
      // A projection whose product joins the residual: added in its GEMV, or left in `branch`.
      auto project = [&](gemv& op, bool adds, const device_buffer<std::uint8_t>& weights, const device_buffer<std::uint8_t>& x) {
        gemv_fusion add;
        add.add_to_output = adds;
        op.run_on(weights.data(), x.data(), adds ? p.residual.data() : p.branch.data(), stream, 1.0f, add);
        pending = !adds;
      };
      // A projection of the normalized residual: the norm in its GEMV, or a kernel of its own first.
      auto normed_projection = [&](gemv& op, bool norms, const device_buffer<std::uint8_t>& norm_weights, const void* weights,
                                   void* y) {
        if (norms) {
          gemv_fusion in;
          in.norm_weight = norm_weights.data();
          in.norm_eps = float(c.norm_eps);
          op.run_on(weights, p.residual.data(), y, stream, 1.0f, in);
        } else {
          norm(norm_weights, pending);
          op.run_on(weights, p.normed.data(), y, stream);
        }
        pending = false;
      };
      for (std::size_t l = 0; l < m_layers.size(); ++l) {
        layer_weights& w = m_layers[l];
        normed_projection(*p.qkv, f.qkv_norms, w.norm1, w.qkv.data(), p.qkv_rows.data());
        if (rope_in_split) {
          rope_split_qkv_into_cache(p.rope, as(p.qkv_rows), as(p.q), reinterpret_cast<T*>(m_k_cache[l].data()),
                                    reinterpret_cast<T*>(m_v_cache[l].data()), split, t, p.per_sequence, p.positions.data(),
                                    table, p.lengths(), stream, overlap_order());
        } else {
          run_rope(p.rope, p.rope_shape, as(p.qkv_rows), p.positions.data(), table, stream);
          split_qkv_into_cache(p.qkv_rows.data(), p.q.data(), m_k_cache[l].data(), m_v_cache[l].data(), split, t,
                               p.per_sequence, p.positions.data(), p.lengths(), stream, overlap_order());
        }
        p.attend->run(p.attend_layers[l], stream, overlap_order());
        project(*p.o, f.o_adds, w.o, p.attended);
        normed_projection(*p.gate_up, f.gate_up_norms, w.norm2, w.gate_up.data(), p.gate_up_rows.data());
        run_swiglu(p.swiglu, p.swiglu_shape, as(p.gate_up_rows), as(p.act), stream);
        project(*p.down, f.down_adds, w.down, p.act);
      }
      if (p.decode) {
        normed_projection(*p.lm_head, f.head_norms, m_final_norm, lm_head_weights(), p.logits.data());
      } else {  // a prefill's logits are its prompts' last tokens'
        norm(m_final_norm, pending);
        gather_last_tokens(p.last.data(), p.normed.data(), p.lengths(), p.per_sequence, h * e, stream);
        p.lm_head->run_on(lm_head_weights(), p.last.data(), p.logits.data(), stream);
      }
    });
  }

  decoder_config m_config;
  decoder_options m_options;
  device_buffer<std::uint8_t> m_embedding, m_final_norm, m_lm_head;
  std::vector<layer_weights> m_layers;
  std::map<std::string, void*> m_tensors;  // checkpoint name -> where it lives
  // Per layer: max_batch x max_context x kv heads x head_dim, or (paged) pool pages + 1 x kv
  // heads x page_size x head_dim.
  std::vector<device_buffer<std::uint8_t>> m_k_cache, m_v_cache;
  std::optional<kv_pages> m_pages;    // a paged cache's table
  std::uint64_t m_page_generation = 1;  // grows whenever the table changes
  std::vector<std::int64_t> m_lengths;  // tokens each slot holds
  device_buffer<float> m_rope_table;  // rope_table() of max_context positions
  std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::unique_ptr<step_plan>> m_plans;
  // gemv_problem::name() -> its search's verdict and timings, for the step shapes after it.
  std::map<std::string, std::pair<search_choice, std::vector<candidate_time>>> m_linear_searches;
  const step_plan* m_last = nullptr;
};

}  // namespace gpucmp
