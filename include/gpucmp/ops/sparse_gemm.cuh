// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A verified 2:4 structured-sparse GEMM through cuSPARSELt (component gpucmp::cusparselt), an
// operation of ops/operation.hpp, laid out as ops/sparse_gemm_problem.hpp says. One object
// owns its operands (random, never zero), A pruned by cuSPARSELt (the two largest magnitudes of
// every four kept) and checked to hold the pattern, then compressed; the output (poisoned),
// the workspace, cuSPARSELt's descriptors and the candidates: each of cuSPARSELt's kernel
// configurations for the problem and, for outputs smaller than a wave of tiles, split-K
// variants of the first ones. The search times them through the engine, as for the dense
// GEMM (cusparseLtMatmulSearch would time them with its own clock). verify() compares the
// output with the FP64 reference of the pruned A (ops/gemm_reference.cuh): a sparse GEMM that
// ignored the pattern, or read the compressed A wrongly, fails it. Measuring is the engine's
// job; this only enqueues the call.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/cusparselt_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/gemm_reference.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/sparse_gemm_problem.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cusparseLt.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

/// Settings of a sparse_gemm.
struct sparse_gemm_options {
  algorithm_choice choice = algorithm_choice::search;  ///< cuSPARSELt's default configuration, or a timed search
  /// How the search times candidates: as the dense GEMM's, the default configuration the
  /// incumbent a challenger must lead by more than the duel's 1 % resolution.
  search_options search = [] {
    search_options s;
    s.duel_incumbent_lead = 0.01;
    s.max_candidates = 64;  // cuSPARSELt has a few dozen configurations, none ranked
    return s;
  }();
  /// Search only: when the output fills less than one wave of 128x128 tiles, also time
  /// split-K variants (2 to 16 slices) of the first `split_k_bases` configurations.
  bool split_k_variants = true;
  int split_k_bases = 4;
  float fp8_scale_a = 0.5f;  ///< FP8 only: A's per-tensor scale (not 1, so the scale path is checked)
  float fp8_scale_b = 2.0f;  ///< FP8 only: B's per-tensor scale
  std::uint64_t seed = 1;    ///< operands' random stream
};

/// The cuSPARSELt kernel a sparse_gemm runs, as recorded in its results.
struct sparse_gemm_algorithm {
  int config = -1;              ///< CUSPARSELT_MATMUL_ALG_CONFIG_ID (-1: cuSPARSELt's default choice)
  int split_k = 0;              ///< CUSPARSELT_MATMUL_SPLIT_K (0: the configuration's own)
  std::size_t workspace = 0;    ///< workspace it needs
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< how it was chosen
  double searched_seconds = 0;  ///< its median per call during the search (0 if not searched)

  /// "config 3 splitk 4 ws 1048576 B (search)"; "default config" for cuSPARSELt's own choice.
  std::string describe() const {
    std::ostringstream s;
    if (config < 0) {
      s << "default config";
    } else {
      s << "config " << config;
    }
    if (split_k > 0) s << " splitk " << split_k;
    s << " ws " << workspace << " B (" << to_string(chosen_by) << ")";
    return s.str();
  }
};

namespace detail {

// cuSPARSELt's objects are structs the caller owns and hands to a destroy call; each is
// destroyed once, in reverse order (statuses on the way out are ignored: destructors never
// throw). They point at each other, so they live together on the heap and never move.
// A plan and the algorithm selection it was made from: the plan keeps pointing at the
// selection (destroying the selection first crashed cusparseLtMatmul on the H100), so both
// live together and go plan first.
struct cusparselt_plan {
  cusparseLtMatmulAlgSelection_t selection{};
  cusparseLtMatmulPlan_t value{};
  bool selection_live = false, live = false;
  cusparselt_plan() = default;
  cusparselt_plan(const cusparselt_plan&) = delete;
  cusparselt_plan& operator=(const cusparselt_plan&) = delete;
  ~cusparselt_plan() {
    if (live) (void)cusparseLtMatmulPlanDestroy(&value);
    if (selection_live) (void)cusparseLtMatmulAlgSelectionDestroy(&selection);
  }
};

struct cusparselt_state {
  cusparseLtHandle_t handle{};
  cusparseLtMatDescriptor_t a{}, b{}, d{};
  cusparseLtMatmulDescriptor_t matmul{};  // cuSPARSELt has no destroy call for it
  int live_descriptors = 0;               // a, b, d: how many were made
  std::vector<std::unique_ptr<cusparselt_plan>> plans;  // by candidate, made when first selected

  cusparselt_state() { GPUCMP_CUSPARSELT_CHECK(cusparseLtInit(&handle)); }
  ~cusparselt_state() {
    plans.clear();
    cusparseLtMatDescriptor_t* descriptors[] = {&a, &b, &d};
    for (int i = live_descriptors - 1; i >= 0; --i) (void)cusparseLtMatDescriptorDestroy(descriptors[i]);
    (void)cusparseLtDestroy(&handle);
  }
  cusparselt_state(const cusparselt_state&) = delete;
  cusparselt_state& operator=(const cusparselt_state&) = delete;
};

/// Makes `selection` cuSPARSELt's default algorithm selection with `config` (< 0: its own
/// choice) and `split_k` (0: the configuration's own); `live` is set once it must be destroyed.
inline void init_cusparselt_selection(cusparselt_state& s, cusparseLtMatmulAlgSelection_t& selection, bool& live, int config,
                                      int split_k) {
  GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulAlgSelectionInit(&s.handle, &selection, &s.matmul, CUSPARSELT_MATMUL_ALG_DEFAULT));
  live = true;
  if (config >= 0) {
    GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulAlgSetAttribute(&s.handle, &selection, CUSPARSELT_MATMUL_ALG_CONFIG_ID, &config, sizeof config));
  }
  if (split_k > 0) {
    GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulAlgSetAttribute(&s.handle, &selection, CUSPARSELT_MATMUL_SPLIT_K, &split_k, sizeof split_k));
  }
}

/// cuSPARSELt's compute type for `t`: 32-bit integer sums for INT8, FP32 otherwise (TF32
/// products for FP32 values).
inline cusparseComputeType cusparselt_compute_type(numerics t) noexcept {
  return t == numerics::int8 ? CUSPARSE_COMPUTE_32I : CUSPARSE_COMPUTE_32F;
}

}  // namespace detail

/// One verified 2:4 sparse GEMM on the current device. An operation (ops/operation.hpp):
/// construction prepares it and times nothing; choose_algorithm() or search() picks the
/// configuration it runs.
class sparse_gemm {
 public:
  /// Prepares `problem`: validates it, checks this GPU's sparse tensor cores and the memory,
  /// allocates and fills the operands on `stream`, prunes A and checks its pattern, compresses
  /// it, and enumerates the candidates (cuSPARSELt's default configuration first). Throws
  /// invalid_argument, unsupported (a precision, shape or GPU cuSPARSELt does not take, by
  /// name), out_of_memory (needed vs free) or library_error.
  sparse_gemm(const sparse_gemm_problem& problem, const sparse_gemm_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem(problem), m_options(options) {
    m_problem.validate();
    const device_info dev = query_current_device();
    const std::string reason = support(m_problem, m_options, dev);
    if (!reason.empty()) throw unsupported(reason);
    const double needed = bytes_needed(m_problem, m_options);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name() + " on " + dev.name);
    m_state = std::make_unique<detail::cusparselt_state>();
    create_descriptors();
    allocate_and_fill(stream);
    prune_and_compress(stream);
    enumerate_candidates();
    select(0, stream);
  }

  /// "" when `device` can run `problem`, else why not. Allocates nothing.
  static std::string support(const sparse_gemm_problem& problem, const sparse_gemm_options& /*options*/,
                             const device_info& device) {
    return sparse_gemm_support(problem.dtype, device.cc_major, device.cc_minor);
  }

  /// Device bytes it allocates before its workspace (known once the candidates are): A dense
  /// and compressed, B, D. Allocates nothing.
  static double bytes_needed(const sparse_gemm_problem& problem, const sparse_gemm_options& /*options*/) {
    return problem.footprint_bytes();
  }

  /// Enqueues the GEMM on `stream` with the selected configuration.
  void operator()(cudaStream_t stream) {
    detail::cusparselt_state& st = *m_state;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmul(&st.handle, &st.plans[m_current]->value, &m_alpha, m_a_compressed.data(), m_b.data(),
                                             &m_beta, m_d.data(), m_d.data(), m_workspace.data(), &stream, 1));
  }

  /// Runs the GEMM once on a poisoned output and compares it with the FP64 reference of the
  /// pruned A.
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_d.data(), 0xFF, m_d.bytes(), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output(stream);
  }

  /// Compares the output as it is now with the reference (verify() without the run).
  verification check_output(cudaStream_t stream) const {
    return visit_gemm_storage(m_problem.dtype, [&](auto storage) {
      using S = decltype(storage);
      const sparse_gemm_problem& p = m_problem;
      // D row-major is D^T column-major: D^T = B^T A^T, B^T's columns the rows of B (n x k
      // row-major, k contiguous), A^T's columns the rows of the pruned A.
      const detail::gemm_geometry g{p.n, p.m, p.k, p.k, p.k, p.n, 0, 0, 0, true, false};
      const double scale = double(m_alpha);
      const detail::gemm_reference_values values = detail::gemm_reference_at_samples<typename S::b_type, typename S::a_type,
                                                                                     typename S::c_type>(
          g, 1, m_b.data(), std::size_t(p.n * p.k), m_a.data(), std::size_t(p.m * p.k), m_d.data(), std::size_t(p.m * p.n),
          scale, stream);
      verification v = detail::gemm_verification(values, gemm_tolerance(p.dtype), double(p.k),
                                                 [](std::int64_t, std::int64_t column, std::int64_t row) {
                                                   return "row " + std::to_string(row) + ", column " + std::to_string(column);
                                                 });
      v.method += " (A as pruned)";
      return v;
    });
  }

  /// How many candidates were enumerated (1 with algorithm_choice::heuristic).
  std::size_t candidate_count() const noexcept { return m_candidates.size(); }
  /// What candidate `i` runs, for the search log.
  std::string describe_candidate(std::size_t i) const { return m_candidates.at(i).describe(); }
  /// Runs candidate `i` from now on: builds its plan (throws unsupported when cuSPARSELt
  /// declines the configuration) and grows the workspace to what it needs.
  void select(std::size_t i, cudaStream_t stream) {
    sparse_gemm_algorithm& c = m_candidates.at(i);
    detail::cusparselt_state& st = *m_state;
    if (!st.plans.at(i)) {  // made once; a plan cuSPARSELt declines leaves the current one running
      auto plan = std::make_unique<detail::cusparselt_plan>();
      detail::init_cusparselt_selection(st, plan->selection, plan->selection_live, c.config, c.split_k);
      GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulPlanInit(&st.handle, &plan->value, &st.matmul, &plan->selection));
      plan->live = true;
      std::size_t workspace = 0;
      GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulGetWorkspace(&st.handle, &plan->value, &workspace));
      c.workspace = workspace;
      st.plans[i] = std::move(plan);
    }
    if (c.workspace > m_workspace.bytes()) {
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old workspace may be in use
      m_workspace = device_buffer<unsigned char>(c.workspace, initial_fill::uninitialized());
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_workspace.data(), 0, c.workspace, stream));
    }
    m_current = i;
    m_chosen = c;
  }
  /// Whether its options ask for a timed search.
  algorithm_choice choice() const noexcept { return m_options.choice; }
  /// How its options ask it to be searched.
  const search_options& search_settings() const noexcept { return m_options.search; }
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    select(chosen.index, nullptr);
    m_chosen.chosen_by = algorithm_choice::search;
    m_chosen.searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
  }

  /// The problem.
  const sparse_gemm_problem& problem() const noexcept { return m_problem; }
  /// The configuration it runs.
  const sparse_gemm_algorithm& algorithm() const noexcept { return m_chosen; }
  /// Every timing of its search (empty until a search ran).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }
  /// Device pointers to A (dense, as pruned), B and D, row-major (for tests and embedders).
  void* a() noexcept { return m_a.data(); }
  void* b() noexcept { return m_b.data(); }  ///< see a()
  void* d() noexcept { return m_d.data(); }  ///< see a()
  /// Bytes of A as cuSPARSELt compressed it.
  std::size_t compressed_bytes() const noexcept { return m_a_compressed.bytes(); }
  /// "sparse_gemm/cusparselt/fp16/8192x8192x8192".
  std::string name() const {
    return std::string("sparse_gemm/cusparselt/") + to_string(m_problem.dtype) + "/" + m_problem.shape_name();
  }
  /// Its problem's axes, what runs it and the version that did, for its row.
  std::vector<axis> axes() const {
    std::vector<axis> a = m_problem.axes();
    a.push_back(axis::of("choice", to_string(m_options.choice)));
    return a;
  }
  std::string provider() const { return "cuSPARSELt"; }  ///< see axes()
  std::vector<std::pair<std::string, std::string>> libraries() const {  ///< see axes()
    int version = 0;
    if (cusparseLtGetVersion(&m_state->handle, &version) != CUSPARSE_STATUS_SUCCESS) version = 0;
    return {{"cusparseLt", std::to_string(version)}};
  }

  /// One call's work: the dense FLOP count at the sparse peak of its precision; A read as
  /// compressed, B read once, D written once.
  gpucmp::work work() const {
    gpucmp::work w;
    w.flops = m_problem.flops();
    w.bytes_read = double(m_a_compressed.bytes()) +
                   double(m_problem.n) * double(m_problem.k) * double(element_bytes(types_of(m_problem.dtype).input));
    w.bytes_written = double(m_problem.m) * double(m_problem.n) * double(element_bytes(types_of(m_problem.dtype).output));
    w.arithmetic = peak_precision(m_problem.dtype);
    w.structure = sparsity::structured_2_4;
    return w;
  }

 private:
  void create_descriptors() {
    const sparse_gemm_problem& p = m_problem;
    const tensor_types& types = types_of(p.dtype);
    const cudaDataType_t a_type = element_info_of(types.weight).cuda, b_type = element_info_of(types.input).cuda,
                         d_type = element_info_of(types.output).cuda;
    const std::uint32_t alignment = 16;
    detail::cusparselt_state& st = *m_state;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtStructuredDescriptorInit(&st.handle, &st.a, p.m, p.k, p.k, alignment, a_type, CUSPARSE_ORDER_ROW,
                                                               CUSPARSELT_SPARSITY_50_PERCENT));
    st.live_descriptors = 1;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(&st.handle, &st.b, p.n, p.k, p.k, alignment, b_type, CUSPARSE_ORDER_ROW));
    st.live_descriptors = 2;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(&st.handle, &st.d, p.m, p.n, p.n, alignment, d_type, CUSPARSE_ORDER_ROW));
    st.live_descriptors = 3;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulDescriptorInit(&st.handle, &st.matmul, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                           CUSPARSE_OPERATION_TRANSPOSE, &st.a, &st.b, &st.d, &st.d,
                                                           detail::cusparselt_compute_type(p.dtype)));
  }

  void allocate_and_fill(cudaStream_t stream) {
    const sparse_gemm_problem& p = m_problem;
    visit_gemm_storage(p.dtype, [&](auto storage) {
      using S = decltype(storage);
      using A = typename S::a_type;
      using B = typename S::b_type;
      using C = typename S::c_type;
      m_a = device_buffer<unsigned char>(std::size_t(p.m * p.k) * sizeof(A), initial_fill::uninitialized());
      m_b = device_buffer<unsigned char>(std::size_t(p.n * p.k) * sizeof(B), initial_fill::uninitialized());
      m_d = device_buffer<unsigned char>(std::size_t(p.m * p.n) * sizeof(C), initial_fill::poison());
      // Integers span their whole range; floats [-1, 1), which every type here represents.
      const double low = std::is_integral_v<A> ? -128 : -1, high = std::is_integral_v<A> ? 127 : 1;
      fill_uniform(reinterpret_cast<A*>(m_a.data()), std::size_t(p.m * p.k), 2 * m_options.seed, low, high, stream);
      fill_uniform(reinterpret_cast<B*>(m_b.data()), std::size_t(p.n * p.k), 2 * m_options.seed + 1, low, high, stream);
    });
    // cuSPARSELt takes alpha and beta in FP32 for every compute type; FP8's per-tensor scales
    // are alpha (one scale each, so their product scales every output alike).
    m_alpha = p.dtype == numerics::fp8_e4m3 ? m_options.fp8_scale_a * m_options.fp8_scale_b : 1.0f;
  }

  void prune_and_compress(cudaStream_t stream) {
    detail::cusparselt_state& st = *m_state;
    cusparseLtHandle_t* h = &st.handle;
    // The two largest magnitudes of every four along k kept, in place: the reference reads
    // this pruned A.
    GPUCMP_CUSPARSELT_CHECK(cusparseLtSpMMAPrune2(h, &st.a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, m_a.data(), m_a.data(),
                                                  CUSPARSELT_PRUNE_SPMMA_STRIP, stream));
    // The check only ever sets the flag (poisoned, it read as set after a correct prune), so it
    // starts at 0.
    device_buffer<int> invalid(1, initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(invalid.data(), 0, sizeof(int), stream));
    GPUCMP_CUSPARSELT_CHECK(
        cusparseLtSpMMAPruneCheck2(h, &st.a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, m_a.data(), invalid.data(), stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (invalid.to_host()[0] != 0) throw library_error(name() + ": A does not hold the 2:4 pattern after cuSPARSELt pruned it");
    std::size_t compressed = 0, scratch = 0;
    GPUCMP_CUSPARSELT_CHECK(cusparseLtSpMMACompressedSize2(h, &st.a, &compressed, &scratch));
    m_a_compressed = device_buffer<unsigned char>(compressed, initial_fill::uninitialized());
    device_buffer<unsigned char> buffer(scratch, initial_fill::uninitialized());
    GPUCMP_CUSPARSELT_CHECK(cusparseLtSpMMACompress2(h, &st.a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, m_a.data(),
                                                     m_a_compressed.data(), buffer.data(), stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch buffer goes
  }

  void enumerate_candidates() {
    m_candidates.push_back({});  // cuSPARSELt's default choice
    if (m_options.choice == algorithm_choice::search) add_searched_candidates();
    m_state->plans.resize(m_candidates.size());
  }

  void add_searched_candidates() {
    int configs = 0;
    {
      detail::cusparselt_plan probe;  // its selection only, to read how many configurations there are
      detail::init_cusparselt_selection(*m_state, probe.selection, probe.selection_live, -1, 0);
      GPUCMP_CUSPARSELT_CHECK(cusparseLtMatmulAlgGetAttribute(&m_state->handle, &probe.selection,
                                                              CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID, &configs, sizeof configs));
    }
    for (int id = 0; id < configs; ++id) m_candidates.push_back({id, 0});
    // Split-K where the output leaves SMs idle: fewer 128x128 tiles than a wave of 132 SMs.
    const double tiles = double((m_problem.m + 127) / 128) * double((m_problem.n + 127) / 128);
    if (m_options.split_k_variants && tiles < 132) {
      for (int id = 0; id < configs && id < m_options.split_k_bases; ++id) {
        for (int split : {2, 4, 8, 16}) {
          if (std::int64_t(split) * 256 <= m_problem.k) m_candidates.push_back({id, split});
        }
      }
    }
  }

  sparse_gemm_problem m_problem;
  sparse_gemm_options m_options;
  std::unique_ptr<detail::cusparselt_state> m_state;
  device_buffer<unsigned char> m_a, m_a_compressed, m_b, m_d, m_workspace;
  float m_alpha = 1.0f, m_beta = 0.0f;
  std::vector<sparse_gemm_algorithm> m_candidates;
  std::size_t m_current = 0;  // the candidate it runs
  sparse_gemm_algorithm m_chosen;
  std::vector<candidate_time> m_search_log;
};

}  // namespace gpucmp
