// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Scaled dot-product attention, forward or backward, as a verified operation
// (ops/operation.hpp) through cuDNN's fused attention (component gpucmp::cudnn): the problem
// (ops/attention_problem.hpp) described as a cudnn-frontend SDPA graph on BSHD tensors (FP8:
// cuDNN's FP8 graph with per-tensor scales; serving: the padding mask and sequence lengths, a
// packed batch's ragged offsets, K and V in a page pool behind page tables), its execution
// plans the candidates
// (ops/cudnn_graph.hpp: heuristic mode A, then the fallback list), timed by the engine; a decode
// step's forward (one query token a sequence) also has gpucmp's split-KV kernel as candidates,
// one a chunk size (ops/decode_attention_kernel.cuh), so the search keeps whichever is faster. A
// forward's output is checked against a double reference on the CPU over sampled query
// positions of the first and last batch, every head. A backward is prepared by one forward
// that also writes the softmax statistics (its O checked the same way); its dQ, dK and dV are
// checked against the FP64 GPU reference of ops/attention_reference.cuh. An FP8 backward's
// scales for dS and the gradients come from the maxima of two calibration calls (delayed
// scaling). cuDNN's version goes in every row (libraries()).
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/attention_reference.cuh>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/decode_attention_kernel.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// How an attention operation is prepared.
struct attention_options {
  algorithm_choice choice = algorithm_choice::search;  ///< search: time the plans, keep the verified fastest
  search_options search;                               ///< how the plans are timed
  std::size_t workspace_limit = std::size_t(1) << 30;  ///< plans needing more are left out
  std::size_t max_plans = 16;                          ///< plans built (in heuristic order)
  /// Paged problems: each sequence's pages (attention_problem::validate_page_table()); empty:
  /// the pool's pages in a fixed shuffled order.
  std::vector<std::int32_t> page_table;
};

/// The caller's tensors for attention::run_on(), laid out as the problem says (BSHD, packed
/// THD, or K and V as a page pool) in its element type. A backward also reads dO and the
/// forward's statistics (FP32, batch x q_heads x seq_q) and writes dQ, dK and dV.
struct attention_tensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;  ///< a forward's output; a backward's input
  const void* dout = nullptr;
  const float* stats = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  /// Serving problems: the caller's sequence lengths, batch query lengths then batch key
  /// lengths (a decode step's grow with every token); null: the problem's.
  const std::int32_t* seq_lengths = nullptr;
  /// Paged problems: the caller's page table (batch rows of pages_per_sequence() pages of the
  /// pool k and v point at); null: the operation's.
  const std::int32_t* page_table = nullptr;
};

/// Tensors bound once for attention::run() (attention::bind()): a model that calls the same
/// attention on the same buffers every step binds them once, not on every call.
class attention_binding {
  friend class attention;
  cudnn_variant_pack m_pack;    // the plan's tensors by uid
  attention_tensors m_tensors;  // the same, for gpucmp's decode kernel (lengths and page table filled in)
};

namespace detail {
/// The uids of an attention graph's tensors. FP8's scales and maxima: a forward's (10 to 17)
/// and a backward's (26 to 36), each run in the order of attention::fp8_scale_values().
namespace attention_uid {
constexpr std::int64_t q = 1, k = 2, v = 3, o = 4, stats = 5, dout = 6, dq = 7, dk = 8, dv = 9;
constexpr std::int64_t descale_q = 10, descale_k = 11, descale_v = 12, descale_s = 13, scale_s = 14, scale_o = 15;
constexpr std::int64_t amax_s = 16, amax_o = 17;
constexpr std::int64_t descale_o = 26, descale_do = 27, descale_dp = 28, scale_dq = 29, scale_dk = 30, scale_dv = 31,
                       scale_dp = 32;
constexpr std::int64_t amax_dq = 33, amax_dk = 34, amax_dv = 35, amax_dp = 36;
constexpr std::int64_t seq_len_q = 18, seq_len_kv = 19, page_table_k = 20, page_table_v = 21;
constexpr std::int64_t ragged_q = 22, ragged_k = 23, ragged_v = 24, ragged_o = 25;
}  // namespace attention_uid

/// Calls f(T{}) with the element type attention stores for `t` (attention_numerics).
template <class F>
decltype(auto) visit_attention_storage(numerics t, F&& f) {
  switch (types_of(t).input) {
    case element_type::fp16: return f(__half{});
    case element_type::bf16: return f(__nv_bfloat16{});
    case element_type::fp8_e4m3: return f(__nv_fp8_e4m3{});
    default: break;
  }
  throw unsupported(std::string("attention: tensors of ") + to_string(types_of(t).input) + " are not stored");
}
}  // namespace detail

/// One verified attention call, forward or backward (attention_problem::pass), on the current
/// device, its inputs filled with random values.
class attention {
 public:
  /// Prepares `p`: validates it (invalid_argument, unsupported), checks it fits in free memory
  /// (out_of_memory), allocates and fills Q, K, V (and for a backward dO) uniform in [-1, 1),
  /// describes the SDPA graph and builds its plans (unsupported when cuDNN has none for it
  /// here). A backward also runs one forward, its first plan, for O and the statistics.
  explicit attention(const attention_problem& p, const attention_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem((p.validate(), p)), m_options(options) {
    if (!options.page_table.empty()) p.validate_page_table(options.page_table);
    const double needed = bytes_needed(p);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name());
    const std::size_t bytes = p.element_size();
    m_q = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
    m_k = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
    m_v = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
    m_o = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
    const bool backward = p.pass == attention_pass::backward;
    if (backward) {
      m_do = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
      m_dq = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
      m_dk = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
      m_dv = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
      m_stats = device_buffer<std::uint8_t>(stats_elements() * sizeof(float), initial_fill::uninitialized());
    }
    if (p.serving()) upload_serving_tables(stream);
    if (p.is_fp8()) {
      m_scales = device_buffer<float>(fp8_slots, initial_fill::poison());
      upload_fp8_scales(stream);
    }
    detail::visit_attention_storage(p.dtype, [&](auto zero) {
      using T = decltype(zero);
      fill_uniform(reinterpret_cast<T*>(m_q.data()), q_elements(), 71, -1, 1, stream);
      fill_uniform(reinterpret_cast<T*>(m_k.data()), kv_elements(), 72, -1, 1, stream);
      fill_uniform(reinterpret_cast<T*>(m_v.data()), kv_elements(), 73, -1, 1, stream);
      if (backward) fill_uniform(reinterpret_cast<T*>(m_do.data()), q_elements(), 74, -1, 1, stream);
    });
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudnnHandle_t h = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&h));
    m_handle = handle_t(h);
    build_plans();
    std::size_t workspace = 0;
    for (const cudnn_plan& plan : m_graph->plans()) workspace = std::max(workspace, plan.workspace);
    if (backward) workspace = std::max(workspace, m_forward->plan(0).workspace);
    if (workspace > 0) m_workspace = device_buffer<std::uint8_t>(workspace, initial_fill::uninitialized());
    m_pack = variant_pack();  // once: the buffers never move, and a call should not rebuild it
    if (decode_attention_runs_here()) m_chunks = decode_attention_chunks(p);
    if (!m_chunks.empty()) {  // the smallest chunk leaves the most partial sums
      const std::size_t partials = decode_attention_partial_floats(p, m_chunks.front());
      if (partials > 0) m_partials = device_buffer<float>(partials, initial_fill::uninitialized());
      m_arrivals = device_buffer<unsigned>(std::size_t(p.batch * p.kv_heads), initial_fill::uninitialized());
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_arrivals.data(), 0, m_arrivals.bytes(), stream));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    if (backward) run_forward(stream);
    if (backward && p.is_fp8()) calibrate_fp8_gradients(stream);
  }

  /// Device bytes it allocates for `p` before its workspace (the largest plan's, at most
  /// attention_options::workspace_limit): Q, K (paged: its page pool), V and O (packed: the
  /// batch's tokens only); for a backward also dO, dQ, dK, dV and the FP32 statistics.
  static double bytes_needed(const attention_problem& p) {
    const double bytes = double(p.element_size());
    const double q = bytes * double(p.head_dim) * double(p.q_rows()) * double(p.q_heads);
    const double kv = bytes * double(p.head_dim) * double(p.kv_rows()) * double(p.kv_heads);
    if (p.pass == attention_pass::forward) {
      const std::vector<std::int64_t> chunks = decode_attention_chunks(p);
      const double partials = chunks.empty() ? 0 : 4.0 * double(decode_attention_partial_floats(p, chunks.front()));
      return 2 * q + 2 * kv + partials;
    }
    return 4 * q + 4 * kv + 4 * double(p.batch) * double(p.q_heads) * double(p.seq_q);
  }

  /// Enqueues one call of the selected plan.
  void operator()(cudaStream_t stream) {
    if (kernel_selected()) return launch_kernel_on(own_tensors(), stream);
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    m_graph->execute(m_handle.get(), m_selected, m_pack, m_workspace.data());
  }

  /// Enqueues one call of the selected plan on the caller's tensors instead of its own: how a
  /// model runs attention searched and verified on this operation's tensors. The FP8 scales
  /// stay the operation's; the sequence lengths and the page table are the caller's where `t`
  /// has them (lengths at most the problem's seq_q and seq_kv: cuDNN reads no further; pages
  /// within its pool). Throws invalid_argument naming a tensor the pass needs and `t` lacks, or
  /// lengths or a page table the problem does not take.
  void run_on(const attention_tensors& t, cudaStream_t stream) { run(bind(t), stream); }

  /// run_on()'s tensors checked and bound once (same errors), for run().
  attention_binding bind(const attention_tensors& t) const {
    namespace uid = detail::attention_uid;
    const bool backward = m_problem.pass == attention_pass::backward;
    std::vector<std::pair<std::int64_t, const void*>> bound{{uid::q, t.q}, {uid::k, t.k}, {uid::v, t.v}, {uid::o, t.o}};
    if (backward) {
      bound.insert(bound.end(), {{uid::dout, t.dout}, {uid::stats, t.stats}, {uid::dq, t.dq}, {uid::dk, t.dk}, {uid::dv, t.dv}});
    }
    const char* names[] = {"", "q", "k", "v", "o", "stats", "dout", "dq", "dk", "dv"};
    attention_binding binding;
    cudnn_variant_pack& pack = binding.m_pack;
    pack = m_pack;
    for (const auto& [id, pointer] : bound) {
      if (pointer == nullptr) throw invalid_argument(name() + ": run_on needs tensor '" + names[id] + "'");
      pack[id] = const_cast<void*>(pointer);  // the frontend's map holds one pointer type; inputs are only read
    }
    if (t.seq_lengths != nullptr) {
      if (!m_problem.serving() || m_problem.packed) {
        throw invalid_argument(name() + ": run_on takes sequence lengths for padded or paged problems only (a packed one's offsets follow its own)");
      }
      pack[uid::seq_len_q] = const_cast<std::int32_t*>(t.seq_lengths);
      pack[uid::seq_len_kv] = const_cast<std::int32_t*>(t.seq_lengths + m_problem.batch);
    }
    if (t.page_table != nullptr) {
      if (m_problem.page_size == 0) throw invalid_argument(name() + ": run_on takes a page table for a paged problem only");
      pack[uid::page_table_k] = const_cast<std::int32_t*>(t.page_table);  // one table for both pools
      pack[uid::page_table_v] = const_cast<std::int32_t*>(t.page_table);
    }
    binding.m_tensors = t;
    const attention_tensors own = own_tensors();
    if (t.seq_lengths == nullptr) binding.m_tensors.seq_lengths = own.seq_lengths;
    if (t.page_table == nullptr) binding.m_tensors.page_table = own.page_table;
    return binding;
  }

  /// Enqueues one call of the selected plan on tensors bound by bind(). gpucmp's decode kernel
  /// is launched in `order` (cuDNN's plans launch as cuDNN does).
  void run(const attention_binding& b, cudaStream_t stream, launch_order order = launch_order::serial) {
    if (kernel_selected()) return launch_kernel_on(b.m_tensors, stream, order);
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    m_graph->execute(m_handle.get(), m_selected, b.m_pack, m_workspace.data());
  }

  /// A backward's forward pass on the caller's tensors: O and the softmax statistics the
  /// backward reads, from q, k and v of `t` (its forward graph's first plan, the one the
  /// operation runs to fill its own O). How a training step runs attention forward and
  /// backward through one operation. Throws invalid_argument for a forward problem or a
  /// missing q, k, v, o or stats.
  void forward_with_statistics_on(const attention_tensors& t, cudaStream_t stream) {
    namespace uid = detail::attention_uid;
    if (m_problem.pass != attention_pass::backward) {
      throw invalid_argument(name() + ": forward_with_statistics_on is a backward problem's (a forward keeps no statistics)");
    }
    if (!t.q || !t.k || !t.v || !t.o || !t.stats) throw invalid_argument(name() + ": forward_with_statistics_on needs q, k, v, o and stats");
    cudnn_variant_pack pack{{uid::q, const_cast<void*>(t.q)}, {uid::k, const_cast<void*>(t.k)}, {uid::v, const_cast<void*>(t.v)},
                            {uid::o, t.o}, {uid::stats, const_cast<float*>(t.stats)}};
    if (m_problem.is_fp8()) {
      for (std::int64_t id : fp8_uids(attention_pass::forward)) pack.insert({id, m_scales.data() + fp8_slot(id)});
    }
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    m_forward->execute(m_handle.get(), 0, pack, m_workspace.data());
  }

  /// "attention/cudnn/bf16/b1_s4096_h32+8_d128/causal" ("/bwd" appended for a backward).
  std::string name() const { return "attention/cudnn/" + m_problem.name(); }
  gpucmp::work work() const { return m_problem.work(); }       ///< the problem's
  std::vector<axis> axes() const { return m_problem.axes(); }  ///< the problem's
  std::string sweep_axis() const { return "seq_q"; }           ///< what a sweep varies
  /// What runs it: "cuDNN", or "gpucmp" when its decode kernel is selected. The name keeps
  /// "cudnn" either way: it names the operation (its rows and their peers), not the candidate.
  std::string provider() const { return kernel_selected() ? "gpucmp" : "cuDNN"; }
  /// cuDNN's version, which every row records (several 9.1x releases have SDPA bugs).
  std::vector<std::pair<std::string, std::string>> libraries() const { return {{"cudnn", std::to_string(cudnnGetVersion())}}; }
  /// cuDNN's plans, then gpucmp's decode kernel at each of its chunk sizes (where it applies).
  std::size_t candidate_count() const noexcept { return m_graph->size() + m_chunks.size(); }
  /// "engine 8 k2=3,k3=0 ws 0 B (TENSOR_CORE)", or "gpucmp split-KV decode kernel, 256 keys a block".
  std::string describe_candidate(std::size_t i) const {
    if (i >= m_graph->size() && i < candidate_count()) {
      return "gpucmp split-KV decode kernel, " + std::to_string(m_chunks[i - m_graph->size()]) + " keys a block";
    }
    const cudnn_plan& p = m_graph->plan(i);
    return "engine " + std::to_string(p.engine) + (p.knobs.empty() ? "" : " " + p.knobs) + " ws " +
           std::to_string(p.workspace) + " B" + (p.notes().empty() ? "" : " (" + p.notes() + ")");
  }
  /// 0: cuDNN's plans, 1: gpucmp's kernel (each group's fastest is re-timed).
  int candidate_group(std::size_t i) const noexcept { return i < m_graph->size() ? 0 : 1; }
  /// Runs candidate `i` from now on.
  void select(std::size_t i, cudaStream_t /*stream*/) {
    if (i >= candidate_count()) throw invalid_argument(name() + ": no candidate " + std::to_string(i));
    if (i < m_graph->size()) (void)m_graph->plan(i);
    m_selected = i;
  }
  algorithm_choice choice() const noexcept { return m_options.choice; }          ///< its options'
  const search_options& search_settings() const noexcept { return m_options.search; }  ///< its options'
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& c, std::vector<candidate_time> log) {
    select(c.index, nullptr);
    m_search.adopt(c, std::move(log));
  }
  const std::vector<candidate_time>& search_log() const noexcept { return m_search.log; }  ///< its search
  /// What it runs now.
  struct algorithm_info {
    std::string plan;                                          ///< describe_candidate() of the plan
    algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< heuristic: cuDNN's first plan
    double searched_seconds = 0;                               ///< its median in the search
    /// "engine 8 ... (search)".
    std::string describe() const { return plan + " (" + to_string(chosen_by) + ")"; }
  };
  algorithm_info algorithm() const {
    return {describe_candidate(m_selected), m_search.chosen_by, m_search.searched_seconds};
  }
  const attention_problem& problem() const noexcept { return m_problem; }  ///< what it computes
  /// O, BSHD (a backward's: the forward's that it reads).
  void* output() noexcept { return m_o.data(); }
  /// Its own tensors, as run_on() takes them (a forward's backward members null): for
  /// embedders that fill or read their own data, or bind some of their own beside these.
  attention_tensors tensors() noexcept {
    attention_tensors t{m_q.data(), m_k.data(), m_v.data(), m_o.data()};
    if (m_problem.pass == attention_pass::backward) {
      t.dout = m_do.data();
      t.stats = reinterpret_cast<const float*>(m_stats.data());
      t.dq = m_dq.data();
      t.dk = m_dk.data();
      t.dv = m_dv.data();
    }
    return t;
  }
  /// A backward's gradient `which` ("dq", "dk" or "dv"), BSHD; throws invalid_argument for a
  /// forward or another name.
  void* gradient(const std::string& which) {
    if (m_problem.pass == attention_pass::backward) {
      if (which == "dq") return m_dq.data();
      if (which == "dk") return m_dk.data();
      if (which == "dv") return m_dv.data();
    }
    throw invalid_argument(name() + ": no gradient '" + which + "' (a backward has dq, dk and dv)");
  }

  /// Poisons what the pass writes (O; dQ, dK and dV), runs once and checks it (check_output()).
  verification verify(cudaStream_t stream) {
    for (device_buffer<std::uint8_t>* out : outputs()) {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(out->data(), 0xFF, out->bytes(), stream));
    }
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output();
  }

  /// Checks what the pass wrote as it is now. Forward: O (FP8: descaled) against a double
  /// reference from the stored Q, K and V (paged: read through the page table) at the query
  /// positions sampled_positions(b) of the first and last sequence b, every query head, within
  /// output_tolerance(). Backward: the O it reads the same way, then dQ, dK and dV
  /// (check_attention_gradients()).
  verification check_output() const {
    return detail::visit_attention_storage(m_problem.dtype, [&](auto zero) {
      using T = decltype(zero);
      verification v = check<T>();
      if (m_problem.pass == attention_pass::backward && v.passed()) {
        const attention_gradients_view t{m_q.data(),  m_k.data(),  m_v.data(),  m_o.data(),
                                         m_do.data(), m_dq.data(), m_dk.data(), m_dv.data()};
        verification g = check_attention_gradients<T>(m_problem, t, nullptr, m_gradient_scales);
        g.method = "O: " + v.method + "; " + g.method;
        g.checked += v.checked;
        return g;
      }
      return v;
    });
  }

  /// What an FP8 backward multiplies O, dS and its gradients by before rounding them (all 1
  /// otherwise): O's fixed scale, the others from the calibration calls.
  const attention_gradient_scales& gradient_scales() const noexcept { return m_gradient_scales; }

  /// The query positions a check of O compares in sequence b (attention_sampled_positions() of
  /// its q_length()).
  std::vector<std::int64_t> sampled_positions(std::int64_t b = 0) const {
    return attention_sampled_positions(m_problem.q_length(b));
  }
  /// The sequences a check compares: the first and the last.
  std::vector<std::int64_t> checked_sequences() const {
    if (m_problem.batch == 1) return {0};
    return {0, m_problem.batch - 1};
  }

 private:
  using handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;

  bool kernel_selected() const noexcept { return m_selected >= m_graph->size(); }
  /// Its own Q, K, V and O, with its sequence lengths and page table where it has them.
  attention_tensors own_tensors() const {
    attention_tensors t{m_q.data(), m_k.data(), m_v.data(), const_cast<std::uint8_t*>(m_o.data())};
    if (m_problem.serving()) t.seq_lengths = m_serving.data();
    if (m_problem.page_size > 0) t.page_table = m_serving.data() + 2 * m_problem.batch;
    return t;
  }
  /// gpucmp's decode kernel, at the selected chunk size, on `t`.
  void launch_kernel_on(const attention_tensors& t, cudaStream_t stream, launch_order order = launch_order::serial) {
    decode_attention_args a;
    a.q = t.q;
    a.k = t.k;
    a.v = t.v;
    a.o = t.o;
    a.kv_lengths = t.seq_lengths != nullptr ? t.seq_lengths + m_problem.batch : nullptr;
    a.page_table = t.page_table;
    a.partials = m_partials.data();
    a.arrivals = m_arrivals.data();
    launch_decode_attention(m_problem, a, m_chunks[m_selected - m_graph->size()], stream, order);
  }

  /// Q's (and O's) elements (attention_problem::q_rows() tokens).
  std::size_t q_elements() const noexcept { return std::size_t(m_problem.q_rows() * m_problem.q_heads * m_problem.head_dim); }
  /// K's (and V's) elements (attention_problem::kv_rows() tokens).
  std::size_t kv_elements() const noexcept {
    return std::size_t(m_problem.kv_rows() * m_problem.kv_heads * m_problem.head_dim);
  }

  /// Serving: the sequence lengths (q_length() and kv_length()); paged, the page table: the
  /// pool's pages shuffled (a fixed permutation; the first batch x pages_per_sequence of them
  /// when the pool is larger), batch rows of pages_per_sequence; packed, the
  /// ragged offsets of Q (and O) and of contiguous K (and V): where each sequence starts, in
  /// elements, batch + 1 of them.
  void upload_serving_tables(cudaStream_t stream) {
    const attention_problem& p = m_problem;
    std::vector<std::int32_t> lengths;
    for (std::int64_t b = 0; b < p.batch; ++b) lengths.push_back(std::int32_t(p.q_length(b)));
    for (std::int64_t b = 0; b < p.batch; ++b) lengths.push_back(std::int32_t(p.kv_length(b)));
    if (p.page_size > 0 && !m_options.page_table.empty()) {
      m_page_table = m_options.page_table;  // validated by the constructor
    } else if (p.page_size > 0) {
      m_page_table.resize(std::size_t(p.pool_pages()));
      for (std::size_t i = 0; i < m_page_table.size(); ++i) m_page_table[i] = std::int32_t(i);
      for (std::size_t i = m_page_table.size(); i > 1; --i) {  // Fisher-Yates on gpucmp's random stream
        std::swap(m_page_table[i - 1], m_page_table[std::size_t(random_bits(77, i) % i)]);
      }
      m_page_table.resize(std::size_t(p.batch * p.pages_per_sequence()));
    }
    lengths.insert(lengths.end(), m_page_table.begin(), m_page_table.end());
    m_ragged_at = lengths.size();
    if (p.packed) {  // validate() keeps these under 2^31
      for (std::int64_t b = 0; b <= p.batch; ++b) lengths.push_back(std::int32_t(p.q_offset(b) * p.q_heads * p.head_dim));
      for (std::int64_t b = 0; b <= p.batch; ++b) lengths.push_back(std::int32_t(p.kv_offset(b) * p.kv_heads * p.head_dim));
    }
    m_serving = device_buffer<std::int32_t>(lengths.size(), initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_serving.data(), lengths.data(), lengths.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  /// Sequence b's K and V as contiguous [token][kv head][element] rows, kv_length(b) of them,
  /// read through the page table when paged.
  template <class T>
  void gather_kv(std::int64_t b, std::vector<T>& k, std::vector<T>& v) const {
    const attention_problem& p = m_problem;
    const std::size_t row = std::size_t(p.kv_heads * p.head_dim), tokens = std::size_t(p.kv_length(b));
    k.resize(tokens * row);
    v.resize(tokens * row);
    if (p.page_size == 0) {
      const std::size_t at = std::size_t(p.kv_offset(b)) * row * sizeof(T);
      GPUCMP_CUDA_CHECK(cudaMemcpy(k.data(), m_k.data() + at, k.size() * sizeof(T), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(v.data(), m_v.data() + at, v.size() * sizeof(T), cudaMemcpyDeviceToHost));
      return;
    }
    const std::size_t ps = std::size_t(p.page_size), d = std::size_t(p.head_dim), page = ps * row;
    std::vector<T> kp(page), vp(page);
    for (std::size_t t = 0; t * ps < tokens; ++t) {
      const std::size_t id = std::size_t(m_page_table[std::size_t(b * p.pages_per_sequence()) + t]);
      GPUCMP_CUDA_CHECK(cudaMemcpy(kp.data(), m_k.data() + id * page * sizeof(T), page * sizeof(T), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(vp.data(), m_v.data() + id * page * sizeof(T), page * sizeof(T), cudaMemcpyDeviceToHost));
      for (std::size_t r = 0; r < ps && t * ps + r < tokens; ++r) {
        for (std::size_t h = 0; h < std::size_t(p.kv_heads); ++h) {  // a page is (kv head, token, element)
          for (std::size_t c = 0; c < d; ++c) {
            k[((t * ps + r) * std::size_t(p.kv_heads) + h) * d + c] = kp[(h * ps + r) * d + c];
            v[((t * ps + r) * std::size_t(p.kv_heads) + h) * d + c] = vp[(h * ps + r) * d + c];
          }
        }
      }
    }
  }

  /// m_scales' slots: a forward's scales and maxima (uids 10 to 17), then a backward's (26 to 36).
  static constexpr std::size_t fp8_forward_slots = 8, fp8_slots = fp8_forward_slots + 11;
  static std::size_t fp8_slot(std::int64_t uid) noexcept {
    namespace id = detail::attention_uid;
    return uid <= id::amax_o ? std::size_t(uid - id::descale_q) : fp8_forward_slots + std::size_t(uid - id::descale_o);
  }
  /// The uids of the FP8 scales and maxima the pass's graph binds.
  std::vector<std::int64_t> fp8_uids(attention_pass pass) const {
    namespace id = detail::attention_uid;
    std::vector<std::int64_t> uids;
    if (pass == attention_pass::forward) {
      for (std::int64_t u = id::descale_q; u <= id::amax_o; ++u) uids.push_back(u);
    } else {  // Q, K, V and S's, then the backward's own
      for (std::int64_t u = id::descale_q; u <= id::scale_s; ++u) uids.push_back(u);
      for (std::int64_t u = id::descale_o; u <= id::amax_dp; ++u) uids.push_back(u);
    }
    return uids;
  }
  /// FP8's scales by uid: Q, K, V and dO descaled by 1 (stored as drawn), P and O scaled by
  /// attention_fp8_p_scale and attention_fp8_o_scale and descaled by the inverses; dS and the
  /// gradients as m_gradient_scales holds them (1 until calibrated).
  std::vector<float> fp8_scale_values() const {
    namespace id = detail::attention_uid;
    std::vector<float> slots(fp8_slots, 0.0f);  // the maxima are written by the calls
    const attention_gradient_scales& g = m_gradient_scales;
    for (const auto& [uid, value] : {std::pair<std::int64_t, double>{id::descale_q, 1}, {id::descale_k, 1},
                                     {id::descale_v, 1}, {id::descale_s, 1 / attention_fp8_p_scale},
                                     {id::scale_s, attention_fp8_p_scale}, {id::scale_o, attention_fp8_o_scale},
                                     {id::descale_o, 1 / attention_fp8_o_scale}, {id::descale_do, 1},
                                     {id::descale_dp, 1 / g.ds}, {id::scale_dq, g.dq}, {id::scale_dk, g.dk},
                                     {id::scale_dv, g.dv}, {id::scale_dp, g.ds}}) {
      slots[fp8_slot(uid)] = float(value);
    }
    return slots;
  }
  void upload_fp8_scales(cudaStream_t stream) {
    const std::vector<float> values = fp8_scale_values();
    GPUCMP_CUDA_CHECK(
        cudaMemcpyAsync(m_scales.data(), values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// The largest magnitude the last call gave the tensor of maximum `uid`.
  float fp8_maximum(std::int64_t uid) const {
    float amax = 0;
    GPUCMP_CUDA_CHECK(cudaMemcpy(&amax, m_scales.data() + fp8_slot(uid), sizeof amax, cudaMemcpyDeviceToHost));
    return amax;
  }
  /// An FP8 backward's scales for dS, then for dQ, dK and dV, each from the maximum of a call
  /// (attention_fp8_scale_for()): dS first, since the gradients' maxima depend on how well dS
  /// was kept. O's scale is the forward's.
  void calibrate_fp8_gradients(cudaStream_t stream) {
    namespace id = detail::attention_uid;
    m_gradient_scales.o = attention_fp8_o_scale;
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_gradient_scales.ds = attention_fp8_scale_for(fp8_maximum(id::amax_dp));
    upload_fp8_scales(stream);
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_gradient_scales.dq = attention_fp8_scale_for(fp8_maximum(id::amax_dq));
    m_gradient_scales.dk = attention_fp8_scale_for(fp8_maximum(id::amax_dk));
    m_gradient_scales.dv = attention_fp8_scale_for(fp8_maximum(id::amax_dv));
    upload_fp8_scales(stream);
  }
  std::size_t stats_elements() const noexcept { return std::size_t(m_problem.batch * m_problem.q_heads * m_problem.seq_q); }

  /// What a call writes.
  std::vector<device_buffer<std::uint8_t>*> outputs() {
    if (m_problem.pass == attention_pass::forward) return {&m_o};
    return {&m_dq, &m_dk, &m_dv};
  }

  /// The tensors of the pass's graph by uid.
  cudnn_variant_pack variant_pack() {
    namespace uid = detail::attention_uid;
    cudnn_variant_pack pack{{uid::q, m_q.data()}, {uid::k, m_k.data()}, {uid::v, m_v.data()}, {uid::o, m_o.data()}};
    if (m_problem.serving()) {
      pack.insert({uid::seq_len_q, m_serving.data()});
      pack.insert({uid::seq_len_kv, m_serving.data() + m_problem.batch});
      if (m_problem.page_size > 0) {  // one table for both pools: a page holds the same tokens of K and V
        pack.insert({uid::page_table_k, m_serving.data() + 2 * m_problem.batch});
        pack.insert({uid::page_table_v, m_serving.data() + 2 * m_problem.batch});
      }
      if (m_problem.packed) {  // O is laid out as Q, V as K
        std::int32_t* ragged = m_serving.data() + m_ragged_at;
        pack.insert({uid::ragged_q, ragged});
        pack.insert({uid::ragged_o, ragged});
        if (m_problem.page_size == 0) {
          pack.insert({uid::ragged_k, ragged + m_problem.batch + 1});
          pack.insert({uid::ragged_v, ragged + m_problem.batch + 1});
        }
      }
    }
    if (m_problem.is_fp8()) {
      for (std::int64_t id : fp8_uids(m_problem.pass)) pack.insert({id, m_scales.data() + fp8_slot(id)});
    }
    if (m_problem.pass == attention_pass::backward) {
      for (const auto& bound : {std::pair<std::int64_t, void*>{uid::stats, m_stats.data()},
                                {uid::dout, m_do.data()}, {uid::dq, m_dq.data()}, {uid::dk, m_dk.data()},
                                {uid::dv, m_dv.data()}}) {
        pack.insert(bound);
      }
    }
    return pack;
  }

  /// A backward's inputs O and the statistics, from the forward graph's first plan.
  void run_forward(cudaStream_t stream) {
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    namespace uid = detail::attention_uid;
    cudnn_variant_pack pack{
        {uid::q, m_q.data()}, {uid::k, m_k.data()}, {uid::v, m_v.data()}, {uid::o, m_o.data()}, {uid::stats, m_stats.data()}};
    if (m_problem.is_fp8()) {
      for (std::int64_t id : fp8_uids(attention_pass::forward)) pack.insert({id, m_scales.data() + fp8_slot(id)});
    }
    m_forward->execute(m_handle.get(), 0, pack, m_workspace.data());
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void build_plans();  // host passes only (ops/cudnn_graph.hpp says why)

  template <class T>
  verification check() const {
    const attention_problem& p = m_problem;
    const std::int64_t d = p.head_dim, hq = p.q_heads, hkv = p.kv_heads, group = hq / hkv;
    const double scale = p.applied_scale();
    const tolerance tol = p.output_tolerance();
    const double floor = p.p_floor(), o_scale = p.is_fp8() ? attention_fp8_o_scale : 1;
    const std::vector<std::int64_t> batches = checked_sequences();
    verification v;
    v.method = "double reference on the CPU, " + std::string(p.q_lengths.empty() ? "" : "up to ") +
               std::to_string(attention_sampled_positions(p.seq_q).size()) + " query positions of " + std::to_string(batches.size()) +
               " batch(es), every head";
    const std::size_t q_row = std::size_t(hq * d);
    std::vector<T> k, val, q(q_row), o(q_row);
    std::vector<double> scores(std::size_t(p.seq_kv));
    for (std::int64_t b : batches) {
      gather_kv(b, k, val);
      for (std::int64_t i : sampled_positions(b)) {
        const std::size_t row = std::size_t(p.q_offset(b) + i) * q_row * sizeof(T);
        GPUCMP_CUDA_CHECK(cudaMemcpy(q.data(), m_q.data() + row, q_row * sizeof(T), cudaMemcpyDeviceToHost));
        GPUCMP_CUDA_CHECK(cudaMemcpy(o.data(), m_o.data() + row, q_row * sizeof(T), cudaMemcpyDeviceToHost));
        const std::int64_t length = p.kv_length(b);
        const std::int64_t seen = p.mask == attention_mask::causal ? std::min(i + 1, length) : length;
        for (std::int64_t h = 0; h < hq; ++h) {
          const std::int64_t kvh = h / group;
          double top = -INFINITY;
          for (std::int64_t j = 0; j < seen; ++j) {
            double s = 0;
            for (std::int64_t c = 0; c < d; ++c) {
              s += to_double(q[std::size_t(h * d + c)]) * to_double(k[std::size_t((j * hkv + kvh) * d + c)]);
            }
            scores[std::size_t(j)] = s * scale;
            top = std::max(top, scores[std::size_t(j)]);
          }
          double sum = 0;
          for (std::int64_t j = 0; j < seen; ++j) sum += (scores[std::size_t(j)] = std::exp(scores[std::size_t(j)] - top));
          for (std::int64_t c = 0; c < d; ++c) {
            double reference = 0, l2 = 0;
            for (std::int64_t j = 0; j < seen; ++j) {
              const double x = to_double(val[std::size_t((j * hkv + kvh) * d + c)]);
              const double term = scores[std::size_t(j)] / sum * x, magnitude = std::fabs(term) + floor * std::fabs(x);
              reference += term;
              l2 += magnitude * magnitude;
            }
            const double got = to_double(o[std::size_t(h * d + c)]) / o_scale;
            v.add_at(got, reference, tol.bound(reference, std::sqrt(l2), double(seen)), [&] {
              return "batch " + std::to_string(b) + ", position " + std::to_string(i) + ", head " + std::to_string(h) +
                     ", element " + std::to_string(c);
            });
          }
        }
      }
    }
    return v;
  }

  attention_problem m_problem;
  attention_options m_options;
  handle_t m_handle;
  std::shared_ptr<const cudnn_graph> m_graph;    // the timed pass's
  std::shared_ptr<const cudnn_graph> m_forward;  // a backward's forward (with statistics)
  cudnn_variant_pack m_pack;                     // the timed pass's tensors by uid (variant_pack())
  device_buffer<std::uint8_t> m_q, m_k, m_v, m_o, m_workspace;
  device_buffer<std::uint8_t> m_do, m_dq, m_dk, m_dv, m_stats;  // a backward's
  device_buffer<float> m_scales;                                 // FP8's scales and maxima (fp8_slot())
  attention_gradient_scales m_gradient_scales;                   // a backward's (FP8: calibrated)
  device_buffer<std::int32_t> m_serving;  // serving: query lengths, key lengths, the page table, ragged offsets
  std::vector<std::int32_t> m_page_table;  // its host copy, for the check
  std::size_t m_ragged_at = 0;             // where m_serving's ragged offsets start
  std::size_t m_selected = 0;
  search_record m_search;
  std::vector<std::int64_t> m_chunks;  // gpucmp's decode kernel's chunk sizes (decode_attention_chunks())
  device_buffer<float> m_partials;     // its partial sums (at the smallest chunk)
  device_buffer<unsigned> m_arrivals;  // its arrival counts, zero between calls
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
inline void attention::build_plans() {
  namespace fe = cudnn_frontend;
  namespace uid = detail::attention_uid;
  const attention_problem& p = m_problem;
  const bool backward = p.pass == attention_pass::backward;
  const element_type stored = types_of(p.dtype).input;
  const auto type = stored == element_type::bf16   ? fe::DataType_t::BFLOAT16
                    : stored == element_type::fp16 ? fe::DataType_t::HALF
                                                   : fe::DataType_t::FP8_E4M3;
  // BSHD in memory, dimensions in cuDNN's (batch, heads, sequence, head_dim) order.
  auto layout = [&p](fe::graph::Tensor_attributes& t, std::int64_t heads, std::int64_t seq) -> fe::graph::Tensor_attributes& {
    return t.set_dim({p.batch, heads, seq, p.head_dim}).set_stride({seq * heads * p.head_dim, p.head_dim, heads * p.head_dim, 1});
  };
  // A packed batch's ragged offsets: where each sequence starts, in elements, batch + 1 of them.
  auto ragged = [&p](fe::graph::Graph& g, std::int64_t id, const char* of) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(std::string(of) + " ragged offsets")
                        .set_uid(id)
                        .set_dim({p.batch + 1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::INT32));
  };
  // Packed: the batch stride gives way to the offsets.
  auto tensor = [&](fe::graph::Graph& g, std::int64_t id, const char* name, std::int64_t heads, std::int64_t seq,
                    std::int64_t ragged_id = 0) {
    fe::graph::Tensor_attributes t;
    layout(t.set_name(name).set_uid(id), heads, seq);
    if (p.packed && ragged_id != 0) t.set_ragged_offset(ragged(g, ragged_id, name));
    return g.tensor(t);
  };
  // The statistics (each query row's log-sum-exp of its scores, FP32): (batch, heads, seq, 1).
  auto stats_layout = [&p](fe::graph::Tensor_attributes& t) -> fe::graph::Tensor_attributes& {
    return t.set_uid(uid::stats)
        .set_dim({p.batch, p.q_heads, p.seq_q, 1})
        .set_stride({p.q_heads * p.seq_q, p.seq_q, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  };
  auto types = [type](fe::graph::Graph& g) {
    g.set_io_data_type(type).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  };
  // One FP32 value: an FP8 graph's scales and maxima.
  auto scalar = [](fe::graph::Tensor_attributes& t, std::int64_t id) -> fe::graph::Tensor_attributes& {
    return t.set_uid(id).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
  };
  // Paged K and V: the pool of pages, (pages, kv heads, page_size, head_dim).
  auto page_pool = [&p](fe::graph::Graph& g, std::int64_t id, const char* name) {
    const std::int64_t ps = p.page_size;
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(id)
                        .set_dim({p.pool_pages(), p.kv_heads, ps, p.head_dim})
                        .set_stride({p.kv_heads * ps * p.head_dim, ps * p.head_dim, p.head_dim, 1}));
  };
  auto int32_table = [](fe::graph::Graph& g, std::int64_t id, const char* name, std::int64_t rows, std::int64_t cols) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(id)
                        .set_dim({rows, 1, cols, 1})
                        .set_stride({cols, cols, 1, 1})
                        .set_data_type(fe::DataType_t::INT32));
  };
  auto describe_forward = [&](fe::graph::Graph& g) {
    types(g);
    auto q = tensor(g, uid::q, "Q", p.q_heads, p.seq_q, uid::ragged_q);
    auto k = p.page_size > 0 ? page_pool(g, uid::k, "K pages") : tensor(g, uid::k, "K", p.kv_heads, p.seq_kv, uid::ragged_k);
    auto v = p.page_size > 0 ? page_pool(g, uid::v, "V pages") : tensor(g, uid::v, "V", p.kv_heads, p.seq_kv, uid::ragged_v);
    auto attributes =
        fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(backward).set_attn_scale(float(p.applied_scale()));
    if (p.mask == attention_mask::causal) attributes.set_causal_mask(true);
    if (p.serving()) {
      attributes.set_padding_mask(true)
          .set_seq_len_q(int32_table(g, uid::seq_len_q, "seq_len_q", p.batch, 1))
          .set_seq_len_kv(int32_table(g, uid::seq_len_kv, "seq_len_kv", p.batch, 1));
    }
    if (p.page_size > 0) {
      attributes.set_paged_attention_k_table(int32_table(g, uid::page_table_k, "page_table_K", p.batch, p.pages_per_sequence()))
          .set_paged_attention_v_table(int32_table(g, uid::page_table_v, "page_table_V", p.batch, p.pages_per_sequence()))
          .set_paged_attention_max_seq_len_kv(int(p.seq_kv));
    }
    if (p.is_fp8()) {
      auto input = [&](std::int64_t id, const char* name) {
        fe::graph::Tensor_attributes t;
        return g.tensor(scalar(t.set_name(name), id));
      };
      auto [o, stats, amax_s, amax_o] = g.sdpa_fp8(
          q, k, v, input(uid::descale_q, "descale_Q"), input(uid::descale_k, "descale_K"), input(uid::descale_v, "descale_V"),
          input(uid::descale_s, "descale_S"), input(uid::scale_s, "scale_S"), input(uid::scale_o, "scale_O"), attributes);
      layout(o->set_output(true).set_uid(uid::o), p.q_heads, p.seq_q);
      scalar(amax_s->set_output(true), uid::amax_s);
      scalar(amax_o->set_output(true), uid::amax_o);
      if (backward) stats_layout(stats->set_output(true));
      return;
    }
    auto [o, stats] = g.sdpa(q, k, v, attributes);
    layout(o->set_output(true).set_uid(uid::o), p.q_heads, p.seq_q);
    if (p.packed) o->set_ragged_offset(ragged(g, uid::ragged_o, "O"));
    if (backward) stats_layout(stats->set_output(true));
  };
  if (!backward) {
    m_graph = std::make_shared<const cudnn_graph>(m_handle.get(), describe_forward, cudnn_numerics{true, false},
                                                  m_options.workspace_limit, m_options.max_plans, name());
    return;
  }
  m_forward = std::make_shared<const cudnn_graph>(m_handle.get(), describe_forward, cudnn_numerics{true, false},
                                                  m_options.workspace_limit, 1, name() + " (its forward)");
  auto describe_backward = [&](fe::graph::Graph& g) {
    types(g);
    auto q = tensor(g, uid::q, "Q", p.q_heads, p.seq_q);
    auto k = tensor(g, uid::k, "K", p.kv_heads, p.seq_kv);
    auto v = tensor(g, uid::v, "V", p.kv_heads, p.seq_kv);
    auto o = tensor(g, uid::o, "O", p.q_heads, p.seq_q);
    auto dout = tensor(g, uid::dout, "dO", p.q_heads, p.seq_q);
    fe::graph::Tensor_attributes stats_attributes;
    auto stats = g.tensor(stats_layout(stats_attributes.set_name("stats")));
    if (p.is_fp8()) {
      auto input = [&](std::int64_t id, const char* name) {
        fe::graph::Tensor_attributes t;
        return g.tensor(scalar(t.set_name(name), id));
      };
      auto attributes =
          fe::graph::SDPA_fp8_backward_attributes().set_name("sdpa_fp8_backward").set_attn_scale(float(p.applied_scale()));
      if (p.mask == attention_mask::causal) attributes.set_causal_mask(true);
      auto [dq, dk, dv, amax_dq, amax_dk, amax_dv, amax_dp] = g.sdpa_fp8_backward(
          q, k, v, o, dout, stats, input(uid::descale_q, "descale_Q"), input(uid::descale_k, "descale_K"),
          input(uid::descale_v, "descale_V"), input(uid::descale_o, "descale_O"), input(uid::descale_do, "descale_dO"),
          input(uid::descale_s, "descale_S"), input(uid::descale_dp, "descale_dP"), input(uid::scale_s, "scale_S"),
          input(uid::scale_dq, "scale_dQ"), input(uid::scale_dk, "scale_dK"), input(uid::scale_dv, "scale_dV"),
          input(uid::scale_dp, "scale_dP"), attributes);
      layout(dq->set_output(true).set_uid(uid::dq), p.q_heads, p.seq_q);
      layout(dk->set_output(true).set_uid(uid::dk), p.kv_heads, p.seq_kv);
      layout(dv->set_output(true).set_uid(uid::dv), p.kv_heads, p.seq_kv);
      for (const auto& [amax, id] : {std::pair{amax_dq, uid::amax_dq}, std::pair{amax_dk, uid::amax_dk},
                                     std::pair{amax_dv, uid::amax_dv}, std::pair{amax_dp, uid::amax_dp}}) {
        scalar(amax->set_output(true), id);
      }
      return;
    }
    auto attributes = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(float(p.applied_scale()));
    if (p.mask == attention_mask::causal) attributes.set_causal_mask(true);
    auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, attributes);
    layout(dq->set_output(true).set_uid(uid::dq), p.q_heads, p.seq_q);
    layout(dk->set_output(true).set_uid(uid::dk), p.kv_heads, p.seq_kv);
    layout(dv->set_output(true).set_uid(uid::dv), p.kv_heads, p.seq_kv);
  };
  m_graph = std::make_shared<const cudnn_graph>(m_handle.get(), describe_backward, cudnn_numerics{true, false},
                                                m_options.workspace_limit, m_options.max_plans, name());
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
