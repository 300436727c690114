// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A verified cuBLASLt GEMM in every precision (component gpucmp::cublas), an operation of
// ops/operation.hpp. One object owns its operands (random, never zero), output (poisoned),
// workspace and cuBLASLt descriptors, and the candidates: the heuristic's top algorithms and
// their variants. choose_algorithm() runs the heuristic's first choice or a search that times
// them through the engine, and the object records the choice. verify() compares the output
// with a double-precision reference: the whole output on the CPU for small problems, whole
// rows and columns (edges included) on the GPU for large ones. Measuring is the engine's
// job; this only enqueues the call.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/cublaslt_algorithm.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/gemm_reference.cuh>
#include <gpucmp/ops/matrix_copy.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/specs/work.hpp>

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// cuBLASLt's types for one precision.
struct cublaslt_types {
  cudaDataType_t a, b, c;         ///< operand types
  cublasComputeType_t compute;    ///< accumulation
  cudaDataType_t scale;           ///< alpha/beta type
};

/// The cuBLASLt types of `t`, read from its tensor types: A the input's, B the weight's, C
/// the output's; the compute type from the accumulator (TF32 products where `t` says so);
/// alpha and beta in the accumulator's type, as cuBLASLt requires.
inline cublaslt_types cublaslt_types_for(numerics t) {
  const tensor_types& types = types_of(t);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (types.accumulate) {
    case element_type::fp64: compute = CUBLAS_COMPUTE_64F; break;
    case element_type::fp32: compute = tf32_products(t) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case element_type::fp16: compute = CUBLAS_COMPUTE_16F; break;
    case element_type::int32: compute = CUBLAS_COMPUTE_32I; break;
    case element_type::bf16:
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2:
    case element_type::int8:
      throw unsupported(std::string("gemm: cuBLASLt does not accumulate in ") + to_string(types.accumulate));
  }
  return {element_info_of(types.input).cuda, element_info_of(types.weight).cuda, element_info_of(types.output).cuda, compute,
          element_info_of(types.accumulate).cuda};
}

/// Whether the search also times candidates that copy misaligned operands into aligned
/// buffers (staging_plan()).
enum class operand_staging {
  off,   ///< never
  also,  ///< staged candidates compete with the unstaged ones (the default)
  only,  ///< only staged candidates, when there is anything to stage (to compare, or test, the staged path)
};

/// How a gemm's search times candidates: search_options' defaults, with cuBLASLt's first
/// choice as the sustained duel's incumbent (a challenger must lead by more than 1 %, the
/// duel's resolution: without the rule, searches picked configurations that then ran behind
/// cuBLASLt's choice; measured in docs/results/h200-operations.md, "Why the search is built this way").
inline search_options gemm_search_defaults() {
  search_options s;
  s.duel_incumbent_lead = 0.01;
  return s;
}

/// Settings of a gemm.
struct gemm_options {
  algorithm_choice choice = algorithm_choice::search;  ///< heuristic's first choice, or timed search
  search_options search = gemm_search_defaults();      ///< how the search times candidates
  std::size_t workspace_bytes = std::size_t{32} << 20; ///< cuBLASLt workspace (32 MiB: what Hopper kernels want)
  /// Search only: when the output fills less than one wave of 128x128 tiles (skinny and small
  /// GEMMs, where splitting K decides the speed), also time split-K variants (2 to 32 slices)
  /// of the heuristic's first `split_k_bases` candidates; cuBLASLt checks each variant.
  bool split_k_variants = true;
  int split_k_bases = 4;     ///< how many heuristic candidates get split-K variants
  /// Search only: also time neighbours of the heuristic's first `config_variant_bases`
  /// candidates that differ in one launch setting a caller may choose: the thread-block
  /// cluster shape (those of at most 8 blocks), CTA swizzling, or the custom option (on Hopper's
  /// nvjet kernels: which operand the cluster shares, and a scheduling variant); tile and
  /// stages stay. cuBLASLt checks each. Off by default: each adds a timing to every search,
  /// and none has yet run faster than the heuristic's own candidates beyond the noise
  /// (docs/results/h200-operations.md, "Why the search is built this way").
  bool config_variants = false;
  int config_variant_bases = 2;  ///< how many heuristic candidates get neighbours
  /// Search only: when a leading dimension or a row count is not a multiple of 16 bytes
  /// (staging_plan()), also time the heuristic's first `staging_candidates` for the problem
  /// padded, with those operands copied into zero-padded aligned buffers (and C copied back),
  /// copies included in the time.
  operand_staging staging = operand_staging::also;
  int staging_candidates = 4;  ///< how many staged candidates are timed
  float fp8_scale_a = 0.5f;  ///< FP8 only: A's per-tensor scale (not 1, so the scale path is checked)
  float fp8_scale_b = 2.0f;  ///< FP8 only: B's per-tensor scale
  std::uint64_t seed = 1;    ///< operands' random stream
};

/// One verified cuBLASLt GEMM, D = alpha op(A) op(B) (+ beta C with beta = 0), on the current
/// device. An operation (ops/operation.hpp): construction prepares it and times nothing;
/// choose_algorithm() or search() picks the algorithm it runs.
class gemm {
 public:
  /// Prepares `problem`: validates it, checks that this GPU supports its precision and that
  /// it fits in memory, allocates and fills the operands on `stream` (and waits for them),
  /// and enumerates the candidates: the heuristic's first choice with
  /// algorithm_choice::heuristic; its top candidates and their variants with search. It runs
  /// candidate 0, the heuristic's first choice, until a search picks another.
  /// Throws invalid_argument, unsupported ("fp8_e4m3 needs sm_89+, this GPU is sm_80"; "no
  /// cuBLASLt algorithm ..."), or out_of_memory (needed vs free).
  gemm(const gemm_problem& problem, const gemm_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem(problem), m_options(options), m_types(cublaslt_types_for(problem.dtype)) {
    m_problem.validate();
    const device_info dev = query_current_device();
    const std::string unsupported_reason = support(m_problem, m_options, dev);
    if (!unsupported_reason.empty()) throw unsupported(unsupported_reason);
    check_fits(dev);
    allocate_and_fill(stream);
    create_descriptors();
    enumerate_candidates(stream);
    select_first_usable(stream);
  }

  /// "" when `device` can run `problem` in its precision, else why not. Allocates nothing.
  static std::string support(const gemm_problem& problem, const gemm_options& /*options*/, const device_info& device) {
    try {
      check_supported(problem.dtype, device.cc_major, device.cc_minor);
    } catch (const unsupported& e) {
      return e.what();
    }
    return {};
  }

  /// Device bytes a gemm of `problem` allocates: its operands and the workspace (staged
  /// copies, when a search adds them, are allocated only if they fit). Allocates nothing.
  static double bytes_needed(const gemm_problem& problem, const gemm_options& options) {
    return problem.footprint_bytes() + double(options.workspace_bytes);
  }

  /// Enqueues the GEMM on `stream` with the selected algorithm (and its staging copies, if any).
  void operator()(cudaStream_t stream) { launch(m_algo, m_run_staged, m_a.data(), m_b.data(), m_c.data(), stream); }

  /// Enqueues the GEMM with the selected algorithm on the caller's A, B and D instead of its
  /// own: how a model runs a GEMM searched and verified on this operation's operands. They are
  /// laid out as the problem says (its transposes, leading dimensions and element types); the
  /// FP8 scales stay the operation's. Throws invalid_argument for a null pointer.
  void run_on(const void* a, const void* b, void* d, cudaStream_t stream) {
    if (a == nullptr || b == nullptr || d == nullptr) throw invalid_argument(name() + ": run_on needs A, B and D");
    launch(m_algo, m_run_staged, a, b, d, stream);
  }

  /// Runs the GEMM once on a poisoned output and compares it with a double reference.
  verification verify(cudaStream_t stream) {
    poison_output(stream);
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output(stream);
  }

  /// Compares the output as it is now with a double reference (verify() without the run).
  verification check_output(cudaStream_t stream) const {
    return visit_gemm_storage(m_problem.dtype, [&](auto storage) { return compare<decltype(storage)>(stream); });
  }

  /// How many candidates were enumerated (1 with algorithm_choice::heuristic).
  std::size_t candidate_count() const noexcept { return m_results.size(); }
  /// What candidate `i` runs, for the search log.
  std::string describe_candidate(std::size_t i) const { return m_described.at(i).describe(); }
  /// Runs candidate `i` from now on; throws unsupported when the heuristic marked it unusable.
  void select(std::size_t i, cudaStream_t /*stream*/) {
    const cublasLtMatmulHeuristicResult_t& r = m_results.at(i);
    if (r.state != CUBLAS_STATUS_SUCCESS) throw unsupported(std::string("heuristic state ") + cublasLtGetStatusName(r.state));
    if (i >= m_unstaged && m_staging_released) {
      throw unsupported("candidate " + std::to_string(i) + " runs staged, and the staged buffers went when the search chose an unstaged one");
    }
    m_algo = r.algo;
    m_run_staged = i >= m_unstaged;
    m_chosen = m_described[i];
  }
  /// Whether its options ask for a timed search.
  algorithm_choice choice() const noexcept { return m_options.choice; }
  /// How its options ask it to be searched.
  const search_options& search_settings() const noexcept { return m_options.search; }
  /// Keeps a search's verdict and timings; staging buffers go when the choice runs unstaged.
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    select(chosen.index, nullptr);
    m_chosen.chosen_by = algorithm_choice::search;
    m_chosen.searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
    if (!m_run_staged) release_staging();
  }

  /// The problem.
  const gemm_problem& problem() const noexcept { return m_problem; }
  /// The algorithm it runs.
  const gemm_algorithm& algorithm() const noexcept { return m_chosen; }
  /// Every timing of its search (empty until a search ran).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }
  /// "gemm/cublaslt/fp16/8192x8192x8192".
  std::string name() const { return std::string("gemm/cublaslt/") + to_string(m_problem.dtype) + "/" + m_problem.shape_name(); }
  /// Its problem's axes (gemm_problem::axes), what runs it and the version that did, for its row.
  std::vector<axis> axes() const {
    std::vector<axis> a = m_problem.axes();
    a.push_back(axis::of("choice", to_string(m_options.choice)));
    return a;
  }
  std::string provider() const { return "cuBLASLt"; }  ///< see axes()
  std::vector<std::pair<std::string, std::string>> libraries() const {  ///< see axes()
    return {{"cublasLt", std::to_string(cublasLtGetVersion())}};
  }

  /// One call's work: exact FLOPs, A and B read once, D written once, at the precision's peak.
  gpucmp::work work() const {
    gpucmp::work w;
    w.flops = m_problem.flops();
    const double b = double(m_problem.batch);
    w.bytes_read = b * double(input_bytes(m_problem.dtype)) * double(m_problem.k) * double(m_problem.m + m_problem.n);
    w.bytes_written = b * double(output_bytes(m_problem.dtype)) * double(m_problem.m) * double(m_problem.n);
    w.arithmetic = peak_precision(m_problem.dtype);
    return w;
  }

  /// Device pointers to A, B and D (for embedders that fill their own data).
  void* a() noexcept { return m_a.data(); }
  void* b() noexcept { return m_b.data(); }  ///< see a()
  void* d() noexcept { return m_c.data(); }  ///< see a()

 private:
  using layout_handle = detail::unique_handle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
  using desc_handle = detail::unique_handle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
  using pref_handle = detail::unique_handle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
  using lt_handle = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;

  /// Whether A and B carry per-tensor scales (the FP8 recipes: numerics.hpp).
  bool is_fp8() const noexcept { return types_of(m_problem.dtype).scale.has_value(); }
  std::int64_t a_cols() const noexcept { return m_problem.transpose_a ? m_problem.m : m_problem.k; }
  std::int64_t b_cols() const noexcept { return m_problem.transpose_b ? m_problem.k : m_problem.n; }
  std::size_t a_elements() const noexcept { return std::size_t(m_problem.batch * m_problem.lda_or_tight() * a_cols()); }
  std::size_t b_elements() const noexcept { return std::size_t(m_problem.batch * m_problem.ldb_or_tight() * b_cols()); }
  std::size_t c_elements() const noexcept { return std::size_t(m_problem.batch * m_problem.ldc_or_tight() * m_problem.n); }

  void check_fits(const device_info& dev) const {
    const double needed = bytes_needed(m_problem, m_options);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) {
      throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name() + " on " + dev.name);
    }
  }

  void allocate_and_fill(cudaStream_t stream) {
    visit_gemm_storage(m_problem.dtype, [&](auto storage) {
      using S = decltype(storage);
      using A = typename S::a_type;
      using B = typename S::b_type;
      using C = typename S::c_type;
      using Scalar = typename S::scalar_type;
      m_a = device_buffer<unsigned char>(a_elements() * sizeof(A), initial_fill::uninitialized());
      m_b = device_buffer<unsigned char>(b_elements() * sizeof(B), initial_fill::uninitialized());
      m_c = device_buffer<unsigned char>(c_elements() * sizeof(C), initial_fill::uninitialized());
      // Integers span their whole range; floats [-1, 1), which every type here represents.
      const double low = std::is_integral_v<A> ? -128 : -1, high = std::is_integral_v<A> ? 127 : 1;
      fill_uniform(reinterpret_cast<A*>(m_a.data()), a_elements(), 2 * m_options.seed, low, high, stream);
      fill_uniform(reinterpret_cast<B*>(m_b.data()), b_elements(), 2 * m_options.seed + 1, low, high, stream);
      const Scalar one = from_double<Scalar>(1.0), zero = from_double<Scalar>(0.0);
      static_assert(sizeof(Scalar) <= sizeof(m_alpha), "scalar too large");
      std::memcpy(m_alpha, &one, sizeof(Scalar));
      std::memcpy(m_beta, &zero, sizeof(Scalar));
    });
    poison_output(stream);
    if (is_fp8()) {  // one allocation each: cuBLASLt wants aligned scale pointers
      m_scale_a = device_buffer<float>(1, initial_fill::uninitialized());
      m_scale_b = device_buffer<float>(1, initial_fill::uninitialized());
      m_scale_a.copy_from_host({m_options.fp8_scale_a});
      m_scale_b.copy_from_host({m_options.fp8_scale_b});
    }
    if (m_options.workspace_bytes != 0) {
      m_workspace = device_buffer<unsigned char>(m_options.workspace_bytes, initial_fill::uninitialized());
      // Written once, outside any timing: under compute-sanitizer's initcheck, cuBLASLt's
      // split-K reduce kernel read workspace words that no write the tool saw had set
      // (results/h200/reliability/sanitizers.md); every result is verified either way.
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_workspace.data(), 0, m_workspace.bytes(), stream));
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void poison_output(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_c.data(), 0xFF, m_c.bytes(), stream));
  }

  layout_handle make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld) const {
    cublasLtMatrixLayout_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, std::uint64_t(rows), std::uint64_t(cols), ld));
    layout_handle layout(raw);
    if (m_problem.batch > 1) {
      const std::int32_t count = std::int32_t(m_problem.batch);
      const std::int64_t stride = ld * cols;
      GPUCMP_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      GPUCMP_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return layout;
  }

  void create_descriptors() {
    cublasLtHandle_t handle = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtCreate(&handle));
    m_handle = lt_handle(handle);
    cublasLtMatmulDesc_t desc = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, m_types.compute, m_types.scale));
    m_desc = desc_handle(desc);
    const cublasOperation_t ta = m_problem.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = m_problem.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (is_fp8()) {
      const float* scale_a = m_scale_a.data();
      const float* scale_b = m_scale_b.data();
      GPUCMP_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a));
      GPUCMP_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b));
    }
    m_layout_a = make_layout(m_types.a, m_problem.a_rows(), a_cols(), m_problem.lda_or_tight());
    m_layout_b = make_layout(m_types.b, m_problem.b_rows(), b_cols(), m_problem.ldb_or_tight());
    m_layout_c = make_layout(m_types.c, m_problem.m, m_problem.n, m_problem.ldc_or_tight());
    cublasLtMatmulPreference_t pref = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    m_pref = pref_handle(pref);
    const std::uint64_t workspace = m_options.workspace_bytes;
    GPUCMP_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  }

  void launch(const cublasLtMatmulAlgo_t& algo, bool staged, const void* a_in, const void* b_in, void* d_out,
              cudaStream_t stream) {
    if (!staged) {
      GPUCMP_CUBLAS_CHECK(cublasLtMatmul(m_handle.get(), m_desc.get(), m_alpha, a_in, m_layout_a.get(), b_in,
                                         m_layout_b.get(), m_beta, d_out, m_layout_c.get(), d_out, m_layout_c.get(), &algo,
                                         m_workspace.data(), m_workspace.bytes(), stream));
      return;
    }
    const gemm_problem& p = m_problem;
    const gemm_staging_plan& plan = m_staging;
    const std::size_t in = input_bytes(p.dtype), out = output_bytes(p.dtype);
    // Only the problem's part is copied: the padding of a staged operand stays as zeroed. A
    // copy's source is only read (matrix_place holds one pointer type for both ends).
    if (plan.a) {
      copy_matrix_columns({m_staged_a.data(), plan.lda, plan.lda * staged_a_cols()},
                          {const_cast<void*>(a_in), p.lda_or_tight(), p.lda_or_tight() * a_cols()}, p.a_rows(), a_cols(), p.batch, in, stream);
    }
    if (plan.b) {
      copy_matrix_columns({m_staged_b.data(), plan.ldb, plan.ldb * staged_b_cols()},
                          {const_cast<void*>(b_in), p.ldb_or_tight(), p.ldb_or_tight() * b_cols()}, p.b_rows(), b_cols(), p.batch, in, stream);
    }
    const void* a = plan.a ? m_staged_a.data() : a_in;
    const void* b = plan.b ? m_staged_b.data() : b_in;
    void* c = plan.c ? m_staged_c.data() : d_out;
    GPUCMP_CUBLAS_CHECK(cublasLtMatmul(m_handle.get(), m_desc.get(), m_alpha, a, m_staged_layout_a.get(), b,
                                       m_staged_layout_b.get(), m_beta, c, m_staged_layout_c.get(), c,
                                       m_staged_layout_c.get(), &algo, m_workspace.data(), m_workspace.bytes(), stream));
    if (plan.c) {
      copy_matrix_columns({d_out, p.ldc_or_tight(), p.ldc_or_tight() * p.n},
                          {m_staged_c.data(), plan.ldc, plan.ldc * plan.n}, p.m, p.n, p.batch, out, stream);
    }
  }

  // Extents of the staged operands (staging_plan() may pad M, N and K).
  std::int64_t staged_a_rows() const noexcept { return m_problem.transpose_a ? m_staging.k : m_staging.m; }
  std::int64_t staged_a_cols() const noexcept { return m_problem.transpose_a ? m_staging.m : m_staging.k; }
  std::int64_t staged_b_rows() const noexcept { return m_problem.transpose_b ? m_staging.n : m_staging.k; }
  std::int64_t staged_b_cols() const noexcept { return m_problem.transpose_b ? m_staging.k : m_staging.n; }

  std::string no_algorithm_hint() const {
    if (is_fp8()) return " (cuBLASLt FP8 needs A transposed, B not (\"_tn\"), and m, n, k multiples of 16)";
    if (m_problem.dtype == numerics::int8) return " (cuBLASLt INT8 needs A transposed, B not (\"_tn\"), and leading dimensions multiples of 4)";
    return "";
  }

  // Runs the first candidate the heuristic marked usable (its first choice, as a rule).
  void select_first_usable(cudaStream_t stream) {
    for (std::size_t i = 0; i < m_results.size(); ++i) {
      if (m_results[i].state == CUBLAS_STATUS_SUCCESS) {
        select(i, stream);
        return;
      }
    }
    throw unsupported("no usable cuBLASLt algorithm for " + name() + ": the heuristic marked every candidate unusable (" +
                      cublasLtGetStatusName(m_results.front().state) + ")");
  }

  // The heuristic's candidates (its first with algorithm_choice::heuristic); for a search
  // also their split-K variants, neighbours and staged copies, as the options ask.
  void enumerate_candidates(cudaStream_t stream) {
    const int wanted = m_options.choice == algorithm_choice::heuristic ? 1 : std::max(1, m_options.search.max_candidates);
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(wanted));
    int returned = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(m_handle.get(), m_desc.get(), m_layout_a.get(), m_layout_b.get(), m_layout_c.get(),
                                       m_layout_c.get(), m_pref.get(), wanted, results.data(), &returned);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && returned == 0)) {
      throw unsupported("no cuBLASLt algorithm for " + name() + " within a " +
                        std::to_string(m_options.workspace_bytes >> 20) + " MiB workspace" + no_algorithm_hint());
    }
    GPUCMP_CUBLAS_CHECK(status);
    results.resize(std::size_t(returned));
    std::vector<gemm_algorithm> described;
    for (std::size_t i = 0; i < results.size(); ++i) described.push_back(cublaslt_algorithm_of(results[i], int(i)));
    std::size_t unstaged = results.size();  // candidates from here on run staged
    if (m_options.choice == algorithm_choice::search) {
      if (m_options.split_k_variants && output_below_one_wave()) add_split_k_variants(results, described);
      if (m_options.config_variants) add_config_variants(results, described);
      unstaged = results.size();
      if (m_options.staging != operand_staging::off) add_staged_candidates(results, described, stream);
      if (m_options.staging == operand_staging::only && results.size() > unstaged) {
        results.erase(results.begin(), results.begin() + std::ptrdiff_t(unstaged));
        described.erase(described.begin(), described.begin() + std::ptrdiff_t(unstaged));
        unstaged = 0;
      }
    }
    m_results = std::move(results);
    m_described = std::move(described);
    m_unstaged = unstaged;
  }

  // When a leading dimension or row count is not a multiple of 16 bytes: the aligned buffers
  // and layouts of staging_plan(), and the heuristic's first staging_candidates for them.
  // Staging that does not fit in memory, or that cuBLASLt has no algorithm for, adds nothing.
  void add_staged_candidates(std::vector<cublasLtMatmulHeuristicResult_t>& results, std::vector<gemm_algorithm>& described,
                             cudaStream_t stream) {
    m_staging = staging_plan(m_problem);
    if (!m_staging.any() || m_options.staging_candidates <= 0) return;
    const gemm_problem& p = m_problem;
    const std::size_t in = input_bytes(p.dtype), out = output_bytes(p.dtype);
    try {
      // Inputs zeroed once: the per-call copies never touch their padding.
      auto zeroed_input = [&](std::int64_t ld, std::int64_t cols) {
        device_buffer<unsigned char> buffer(std::size_t(p.batch * ld * cols) * in, initial_fill::uninitialized());
        GPUCMP_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, buffer.bytes(), stream));
        return buffer;
      };
      if (m_staging.a) m_staged_a = zeroed_input(m_staging.lda, staged_a_cols());
      if (m_staging.b) m_staged_b = zeroed_input(m_staging.ldb, staged_b_cols());
      if (m_staging.c) {
        m_staged_c = device_buffer<unsigned char>(std::size_t(p.batch * m_staging.ldc * m_staging.n) * out, initial_fill::uninitialized());
      }
    } catch (const out_of_memory&) {
      release_staging();
      return;
    }
    m_staged_layout_a = make_layout(m_types.a, staged_a_rows(), staged_a_cols(), m_staging.lda);
    m_staged_layout_b = make_layout(m_types.b, staged_b_rows(), staged_b_cols(), m_staging.ldb);
    m_staged_layout_c = make_layout(m_types.c, m_staging.m, m_staging.n, m_staging.ldc);
    std::vector<cublasLtMatmulHeuristicResult_t> staged(std::size_t(m_options.staging_candidates));
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        m_handle.get(), m_desc.get(), m_staged_layout_a.get(), m_staged_layout_b.get(), m_staged_layout_c.get(),
        m_staged_layout_c.get(), m_pref.get(), m_options.staging_candidates, staged.data(), &returned);
    if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {  // no algorithm is an answer, not an error
      release_staging();
      return;
    }
    for (int i = 0; i < returned; ++i) {
      results.push_back(staged[std::size_t(i)]);
      described.push_back(cublaslt_algorithm_of(staged[std::size_t(i)], i));
      described.back().staged = m_staging.operands();
      if (m_staging.m != p.m || m_staging.n != p.n || m_staging.k != p.k) {
        described.back().staged_as = std::to_string(m_staging.m) + "x" + std::to_string(m_staging.n) + "x" + std::to_string(m_staging.k);
      }
    }
  }

  void release_staging() {
    m_staging_released = true;
    m_staged_a = {};
    m_staged_b = {};
    m_staged_c = {};
    m_staged_layout_a = {};
    m_staged_layout_b = {};
    m_staged_layout_c = {};
  }

  // Fewer outputs than one wave of 128x128 tiles on this GPU's SMs: splitting K is how such a
  // GEMM fills the GPU, and the heuristic's list has few split-K choices.
  bool output_below_one_wave() const {
    int sms = 0;
    GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, current_device()));
    return double(m_problem.m) * double(m_problem.n) * double(m_problem.batch) <= double(sms) * 128.0 * 128.0;
  }

  // Appends, for the first split_k_bases candidates, copies with 2 to 32 K slices that
  // cuBLASLt's own check accepts within the workspace (first reduction scheme that works;
  // one already in the list is not added twice).
  void add_split_k_variants(std::vector<cublasLtMatmulHeuristicResult_t>& results, std::vector<gemm_algorithm>& described) {
    const std::size_t bases = std::min(results.size(), std::size_t(std::max(0, m_options.split_k_bases)));
    const std::uint32_t schemes[] = {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE,
                                     CUBLASLT_REDUCTION_SCHEME_INPLACE};
    auto already_listed = [&](const cublasLtMatmulAlgo_t& algo) {
      return std::any_of(results.begin(), results.end(), [&](const cublasLtMatmulHeuristicResult_t& r) {
        return std::memcmp(&r.algo, &algo, sizeof algo) == 0;
      });
    };
    for (std::size_t base = 0; base < bases; ++base) {
      if (results[base].state != CUBLAS_STATUS_SUCCESS) continue;
      for (std::int32_t slices : {2, 3, 4, 6, 8, 16, 32}) {
        if (slices >= m_problem.k) break;
        for (std::uint32_t scheme : schemes) {
          cublasLtMatmulHeuristicResult_t variant = results[base];
          if (cublasLtMatmulAlgoConfigSetAttribute(&variant.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &slices, sizeof slices) !=
                  CUBLAS_STATUS_SUCCESS ||
              cublasLtMatmulAlgoConfigSetAttribute(&variant.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                   sizeof scheme) != CUBLAS_STATUS_SUCCESS) {
            continue;
          }
          // Not supported is an answer here, not an error: the variant is simply not offered.
          const cublasLtMatmulAlgo_t algo = variant.algo;
          if (cublasLtMatmulAlgoCheck(m_handle.get(), m_desc.get(), m_layout_a.get(), m_layout_b.get(), m_layout_c.get(),
                                      m_layout_c.get(), &algo, &variant) != CUBLAS_STATUS_SUCCESS ||
              variant.workspaceSize > m_options.workspace_bytes) {
            continue;
          }
          variant.algo = algo;
          variant.state = CUBLAS_STATUS_SUCCESS;
          if (!already_listed(variant.algo)) {
            results.push_back(variant);
            described.push_back(cublaslt_algorithm_of(variant, int(base)));
            described.back().split_k_variant = true;
          }
          break;
        }
      }
    }
  }

  // Appends, for the first config_variant_bases candidates, the neighbours that cuBLASLt's
  // own check accepts within the workspace: each other cluster shape of at most 8 blocks,
  // the other CTA swizzling, each other custom option up to the algorithm's maximum. One
  // already in the list is not added twice.
  void add_config_variants(std::vector<cublasLtMatmulHeuristicResult_t>& results, std::vector<gemm_algorithm>& described) {
    const std::size_t bases = std::min(results.size(), std::size_t(std::max(0, m_options.config_variant_bases)));
    // CUBLASLT_CLUSTER_SHAPE_1x1x1 ... 1x8x1 without 4x4x1: the portable cluster sizes.
    const std::uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x2x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x4x1, CUBLASLT_CLUSTER_SHAPE_2x4x1, CUBLASLT_CLUSTER_SHAPE_8x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x8x1};
    auto offer = [&](const cublasLtMatmulHeuristicResult_t& base, std::size_t rank, cublasLtMatmulAlgoConfigAttributes_t attr,
                     const void* value, std::size_t bytes) {
      cublasLtMatmulHeuristicResult_t variant = base;
      if (cublasLtMatmulAlgoConfigSetAttribute(&variant.algo, attr, value, bytes) != CUBLAS_STATUS_SUCCESS) return;
      const cublasLtMatmulAlgo_t algo = variant.algo;
      const bool listed_already = std::any_of(results.begin(), results.end(), [&](const cublasLtMatmulHeuristicResult_t& r) {
        return std::memcmp(&r.algo, &algo, sizeof algo) == 0;
      });
      // Not supported is an answer here, not an error: the neighbour is simply not offered.
      if (listed_already ||
          cublasLtMatmulAlgoCheck(m_handle.get(), m_desc.get(), m_layout_a.get(), m_layout_b.get(), m_layout_c.get(),
                                  m_layout_c.get(), &algo, &variant) != CUBLAS_STATUS_SUCCESS ||
          variant.workspaceSize > m_options.workspace_bytes) {
        return;
      }
      variant.algo = algo;
      variant.state = CUBLAS_STATUS_SUCCESS;
      results.push_back(variant);
      described.push_back(cublaslt_algorithm_of(variant, int(rank)));
      described.back().config_variant = true;
    };
    for (std::size_t rank = 0; rank < bases; ++rank) {
      const cublasLtMatmulHeuristicResult_t base = results[rank];  // a copy: push_back may reallocate
      if (base.state != CUBLAS_STATUS_SUCCESS) continue;
      const gemm_algorithm config = cublaslt_algorithm_of(base, int(rank));
      for (std::uint16_t cluster : clusters) {
        if (cluster != config.cluster) offer(base, rank, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster);
      }
      const std::uint32_t other_swizzle = config.swizzle == 0 ? 1 : 0;
      offer(base, rank, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &other_swizzle, sizeof other_swizzle);
      std::int32_t custom_max = 0;
      std::size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&base.algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof custom_max,
                                            &written) != CUBLAS_STATUS_SUCCESS) {
        custom_max = 0;
      }
      for (std::uint32_t custom = 0; custom <= std::uint32_t(std::max(0, custom_max)); ++custom) {
        if (custom != config.custom) offer(base, rank, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom);
      }
    }
  }

  template <class S>
  verification compare(cudaStream_t stream) const {
    using A = typename S::a_type;
    using B = typename S::b_type;
    using C = typename S::c_type;
    const gemm_problem& p = m_problem;
    const detail::gemm_geometry g{p.m, p.n, p.k, p.lda_or_tight(), p.ldb_or_tight(), p.ldc_or_tight(),
                                  p.lda_or_tight() * a_cols(), p.ldb_or_tight() * b_cols(), p.ldc_or_tight() * p.n,
                                  p.transpose_a, p.transpose_b};
    const double scale = is_fp8() ? double(m_options.fp8_scale_a) * double(m_options.fp8_scale_b) : 1.0;
    const detail::gemm_reference_values values = detail::gemm_reference_at_samples<A, B, C>(
        g, p.batch, m_a.data(), a_elements(), m_b.data(), b_elements(), m_c.data(), c_elements(), scale, stream);
    return detail::gemm_verification(values, gemm_tolerance(p.dtype), double(p.k), [](std::int64_t bt, std::int64_t i, std::int64_t j) {
      return "batch " + std::to_string(bt) + ", row " + std::to_string(i) + ", column " + std::to_string(j);
    });
  }

  gemm_problem m_problem;
  gemm_options m_options;
  cublaslt_types m_types;
  device_buffer<unsigned char> m_a, m_b, m_c, m_workspace;
  device_buffer<float> m_scale_a, m_scale_b;
  alignas(8) unsigned char m_alpha[8] = {};
  alignas(8) unsigned char m_beta[8] = {};
  lt_handle m_handle;
  desc_handle m_desc;
  layout_handle m_layout_a, m_layout_b, m_layout_c;
  pref_handle m_pref;
  // Staging (add_staged_candidates): aligned copies of the operands staging_plan() names.
  gemm_staging_plan m_staging;
  device_buffer<unsigned char> m_staged_a, m_staged_b, m_staged_c;
  layout_handle m_staged_layout_a, m_staged_layout_b, m_staged_layout_c;
  bool m_run_staged = false;  // the selected algorithm runs on the staged operands
  // The candidates (enumerate_candidates): the heuristic's results and variants, described;
  // those from m_unstaged on run staged.
  std::vector<cublasLtMatmulHeuristicResult_t> m_results;
  std::vector<gemm_algorithm> m_described;
  std::size_t m_unstaged = 0;
  bool m_staging_released = false;  // a search chose an unstaged candidate: staged ones cannot run
  cublasLtMatmulAlgo_t m_algo{};
  gemm_algorithm m_chosen;
  std::vector<candidate_time> m_search_log;
};

}  // namespace gpucmp
