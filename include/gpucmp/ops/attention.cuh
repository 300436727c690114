// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Scaled dot-product attention, forward, as a verified operation (ops/operation.hpp) through
// cuDNN's fused attention (component gpucmp::cudnn): the problem (ops/attention_problem.hpp)
// described as a cudnn-frontend SDPA graph on BSHD tensors, its execution plans the candidates
// (ops/cudnn_graph.hpp: heuristic mode A, then the fallback list), timed by the engine. The
// output is checked against a double reference on the CPU over sampled query positions of
// the first and last batch, every head. cuDNN's version goes in every row (libraries()).
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
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
};

namespace detail {
/// The uids of an attention graph's tensors.
namespace attention_uid {
constexpr std::int64_t q = 1, k = 2, v = 3, o = 4;
}  // namespace attention_uid
}  // namespace detail

/// One verified attention forward on the current device, Q, K and V filled with random values.
class attention {
 public:
  /// Prepares `p`: validates it (invalid_argument, unsupported), checks it fits in free memory
  /// (out_of_memory), allocates and fills Q, K uniform in [-1, 1) and V in [-1, 1), describes
  /// the SDPA graph and builds its plans (unsupported when cuDNN has none for it here).
  explicit attention(const attention_problem& p, const attention_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem((p.validate(), p)), m_options(options) {
    const double needed = bytes_needed(p);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name());
    const std::size_t bytes = activation_bytes(p.dtype);
    m_q = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
    m_k = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
    m_v = device_buffer<std::uint8_t>(kv_elements() * bytes, initial_fill::uninitialized());
    m_o = device_buffer<std::uint8_t>(q_elements() * bytes, initial_fill::uninitialized());
    visit_floating_storage(types_of(p.dtype).input, [&](auto zero) {
      using T = decltype(zero);
      fill_uniform(reinterpret_cast<T*>(m_q.data()), q_elements(), 71, -1, 1, stream);
      fill_uniform(reinterpret_cast<T*>(m_k.data()), kv_elements(), 72, -1, 1, stream);
      fill_uniform(reinterpret_cast<T*>(m_v.data()), kv_elements(), 73, -1, 1, stream);
    });
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudnnHandle_t h = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&h));
    m_handle = handle_t(h);
    build_plans();
    std::size_t workspace = 0;
    for (const cudnn_plan& plan : m_graph->plans()) workspace = std::max(workspace, plan.workspace);
    if (workspace > 0) m_workspace = device_buffer<std::uint8_t>(workspace, initial_fill::uninitialized());
  }

  /// Device bytes it allocates for `p` before its workspace (the largest plan's, at most
  /// attention_options::workspace_limit): Q, K, V and O.
  static double bytes_needed(const attention_problem& p) {
    const double bytes = double(activation_bytes(p.dtype));
    return bytes * double(p.batch) * double(p.head_dim) * (2 * double(p.seq_q) * double(p.q_heads) + 2 * double(p.seq_kv) * double(p.kv_heads));
  }

  /// Enqueues one call of the selected plan.
  void operator()(cudaStream_t stream) {
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    const cudnn_variant_pack pack{{detail::attention_uid::q, m_q.data()},
                                  {detail::attention_uid::k, m_k.data()},
                                  {detail::attention_uid::v, m_v.data()},
                                  {detail::attention_uid::o, m_o.data()}};
    m_graph->execute(m_handle.get(), m_selected, pack, m_workspace.data());
  }

  /// "attention/cudnn/bf16/b1_s4096_h32+8_d128/causal".
  std::string name() const { return "attention/cudnn/" + m_problem.name(); }
  gpucmp::work work() const { return m_problem.work(); }       ///< the problem's
  std::vector<axis> axes() const { return m_problem.axes(); }  ///< the problem's
  std::string sweep_axis() const { return "seq_q"; }           ///< what a sweep varies
  std::string provider() const { return "cuDNN"; }             ///< what runs it
  /// cuDNN's version, which every row records (several 9.1x releases have SDPA bugs).
  std::vector<std::pair<std::string, std::string>> libraries() const { return {{"cudnn", std::to_string(cudnnGetVersion())}}; }
  std::size_t candidate_count() const noexcept { return m_graph->size(); }  ///< the plans built
  /// "engine 8 k2=3,k3=0 ws 0 B (TENSOR_CORE)".
  std::string describe_candidate(std::size_t i) const {
    const cudnn_plan& p = m_graph->plan(i);
    return "engine " + std::to_string(p.engine) + (p.knobs.empty() ? "" : " " + p.knobs) + " ws " +
           std::to_string(p.workspace) + " B" + (p.notes().empty() ? "" : " (" + p.notes() + ")");
  }
  /// Runs plan `i` from now on.
  void select(std::size_t i, cudaStream_t /*stream*/) {
    (void)m_graph->plan(i);
    m_selected = i;
  }
  algorithm_choice choice() const noexcept { return m_options.choice; }          ///< its options'
  const search_options& search_settings() const noexcept { return m_options.search; }  ///< its options'
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& c, std::vector<candidate_time> log) {
    select(c.index, nullptr);
    m_chosen_by = algorithm_choice::search;
    m_searched_seconds = c.seconds;
    m_log = std::move(log);
  }
  const std::vector<candidate_time>& search_log() const noexcept { return m_log; }  ///< its search
  /// What it runs now.
  struct algorithm_info {
    std::string plan;                                          ///< describe_candidate() of the plan
    algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< heuristic: cuDNN's first plan
    double searched_seconds = 0;                               ///< its median in the search
    /// "engine 8 ... (search)".
    std::string describe() const { return plan + " (" + to_string(chosen_by) + ")"; }
  };
  algorithm_info algorithm() const { return {describe_candidate(m_selected), m_chosen_by, m_searched_seconds}; }
  const attention_problem& problem() const noexcept { return m_problem; }  ///< what it computes
  void* output() noexcept { return m_o.data(); }                           ///< O, BSHD

  /// Poisons O, runs once and checks it (check_output()).
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_o.data(), 0xFF, m_o.bytes(), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output();
  }

  /// Checks O as it is now against a double reference from the stored Q, K and V at the query
  /// positions sampled_positions() of the first and last batch, every query head, within
  /// output_tolerance().
  verification check_output() const {
    return visit_floating_storage(types_of(m_problem.dtype).input, [&](auto zero) { return check<decltype(zero)>(); });
  }

  /// The query positions a check compares: the first two and last two, and 12 spread between.
  std::vector<std::int64_t> sampled_positions() const {
    std::set<std::int64_t> s;
    const std::int64_t n = m_problem.seq_q;
    for (std::int64_t i : {std::int64_t(0), std::int64_t(1), n - 2, n - 1}) {
      if (i >= 0 && i < n) s.insert(i);
    }
    for (int i = 1; i <= 12; ++i) s.insert(n * i / 13);
    return {s.begin(), s.end()};
  }

 private:
  using handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;

  std::size_t q_elements() const noexcept {
    return std::size_t(m_problem.batch * m_problem.seq_q * m_problem.q_heads * m_problem.head_dim);
  }
  std::size_t kv_elements() const noexcept {
    return std::size_t(m_problem.batch * m_problem.seq_kv * m_problem.kv_heads * m_problem.head_dim);
  }

  void build_plans();  // host passes only (ops/cudnn_graph.hpp says why)

  template <class T>
  verification check() const {
    const attention_problem& p = m_problem;
    const std::int64_t d = p.head_dim, hq = p.q_heads, hkv = p.kv_heads, group = hq / hkv;
    const double scale = p.applied_scale();
    const tolerance tol = p.output_tolerance();
    const std::vector<std::int64_t> positions = sampled_positions();
    std::vector<std::int64_t> batches{0};
    if (p.batch > 1) batches.push_back(p.batch - 1);
    verification v;
    v.method = "double reference on the CPU, " + std::to_string(positions.size()) + " query positions of " +
               std::to_string(batches.size()) + " batch(es), every head";
    const std::size_t kv_batch = std::size_t(p.seq_kv * hkv * d), q_row = std::size_t(hq * d);
    std::vector<T> k(kv_batch), val(kv_batch), q(q_row), o(q_row);
    std::vector<double> scores(std::size_t(p.seq_kv));
    for (std::int64_t b : batches) {
      GPUCMP_CUDA_CHECK(cudaMemcpy(k.data(), m_k.data() + std::size_t(b) * kv_batch * sizeof(T), kv_batch * sizeof(T), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(val.data(), m_v.data() + std::size_t(b) * kv_batch * sizeof(T), kv_batch * sizeof(T), cudaMemcpyDeviceToHost));
      for (std::int64_t i : positions) {
        const std::size_t row = std::size_t(b * p.seq_q + i) * q_row * sizeof(T);
        GPUCMP_CUDA_CHECK(cudaMemcpy(q.data(), m_q.data() + row, q_row * sizeof(T), cudaMemcpyDeviceToHost));
        GPUCMP_CUDA_CHECK(cudaMemcpy(o.data(), m_o.data() + row, q_row * sizeof(T), cudaMemcpyDeviceToHost));
        const std::int64_t seen = p.mask == attention_mask::causal ? std::min(i + 1, p.seq_kv) : p.seq_kv;
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
              const double term = scores[std::size_t(j)] / sum * to_double(val[std::size_t((j * hkv + kvh) * d + c)]);
              reference += term;
              l2 += term * term;
            }
            v.add_at(to_double(o[std::size_t(h * d + c)]), reference, tol.bound(reference, std::sqrt(l2), double(seen)), [&] {
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
  std::shared_ptr<const cudnn_graph> m_graph;
  device_buffer<std::uint8_t> m_q, m_k, m_v, m_o, m_workspace;
  std::size_t m_selected = 0;
  algorithm_choice m_chosen_by = algorithm_choice::heuristic;
  double m_searched_seconds = 0;
  std::vector<candidate_time> m_log;
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
inline void attention::build_plans() {
  namespace fe = cudnn_frontend;
  const attention_problem& p = m_problem;
  auto describe = [&p](fe::graph::Graph& g) {
    const auto type = types_of(p.dtype).input == element_type::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
    g.set_io_data_type(type).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    // BSHD in memory, dimensions in cuDNN's (batch, heads, sequence, head_dim) order.
    auto tensor = [&](std::int64_t uid, const char* name, std::int64_t heads, std::int64_t seq) {
      return g.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({p.batch, heads, seq, p.head_dim})
                          .set_stride({seq * heads * p.head_dim, p.head_dim, heads * p.head_dim, 1}));
    };
    auto q = tensor(detail::attention_uid::q, "Q", p.q_heads, p.seq_q);
    auto k = tensor(detail::attention_uid::k, "K", p.kv_heads, p.seq_kv);
    auto v = tensor(detail::attention_uid::v, "V", p.kv_heads, p.seq_kv);
    auto attributes = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(float(p.applied_scale()));
    if (p.mask == attention_mask::causal) attributes.set_causal_mask(true);
    auto [o, stats] = g.sdpa(q, k, v, attributes);
    (void)stats;
    o->set_output(true)
        .set_uid(detail::attention_uid::o)
        .set_dim({p.batch, p.q_heads, p.seq_q, p.head_dim})
        .set_stride({p.seq_q * p.q_heads * p.head_dim, p.head_dim, p.q_heads * p.head_dim, 1});
  };
  m_graph = std::make_shared<const cudnn_graph>(m_handle.get(), describe, cudnn_numerics{true, false},
                                                m_options.workspace_limit, m_options.max_plans, name());
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
