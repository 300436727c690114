// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The candidates of an operation gpucmp runs with its own kernels (RMSNorm, RoPE, SwiGLU):
// launch shapes (threads per block, 16-byte vectors per thread, vector or element access),
// the one selected, and what a search settled; and kernel_operation, the base each such
// operation derives from, so the contract's chores (work, axes, select, adopt_search,
// search_log, algorithm, ...) are written once.
// Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/launch.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/specs/work.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// One launch shape of an elementwise or row-wise kernel.
struct launch_shape {
  int threads = 256;       ///< threads per block
  int items = 1;           ///< 16-byte vectors (or elements, when not vectorized) each thread handles
  bool vectorized = true;  ///< 16-byte loads and stores; false: one element at a time (any alignment)
  /// Against the kernel before it in the stream: a decoder's step overlaps its kernels
  /// (cuda/launch.hpp); a search times each candidate serially, as it is left by default.
  launch_order order = launch_order::serial;
  /// "256x4v" (vectorized) or "256x4e" (element by element).
  std::string describe() const { return std::to_string(threads) + "x" + std::to_string(items) + (vectorized ? "v" : "e"); }
};

/// What a kernel operation runs: its launch shape and how it was chosen.
struct kernel_algorithm {
  std::string shape;                                          ///< launch_shape::describe()
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< candidate 0, or the search's verdict
  double searched_seconds = 0;                                ///< its median per call in the search (search only)
  /// "256x4v (search)".
  std::string describe() const { return shape + " (" + to_string(chosen_by) + ")"; }
};

/// An operation's launch shapes, the selected one and its search's record.
class kernel_candidates {
 public:
  /// Shapes in the order tried; the first runs until a search picks another. `what` names the
  /// operation in errors. Throws invalid_argument when `shapes` is empty.
  kernel_candidates(std::vector<launch_shape> shapes, const std::string& what) : m_shapes(std::move(shapes)) {
    if (m_shapes.empty()) throw invalid_argument(what + ": no launch shape fits this problem");
  }

  std::size_t size() const noexcept { return m_shapes.size(); }          ///< how many shapes
  const launch_shape& at(std::size_t i) const { return m_shapes.at(i); }  ///< shape i
  const launch_shape& selected() const noexcept { return m_shapes[m_selected]; }  ///< the one that runs
  /// Runs shape `i` from now on (throws std::out_of_range past the end).
  void select(std::size_t i) {
    (void)m_shapes.at(i);
    m_selected = i;
  }
  /// Keeps a search's verdict and every timing, and selects its choice.
  void adopt(const search_choice& chosen, std::vector<candidate_time> log) {
    select(chosen.index);
    m_search.adopt(chosen, std::move(log));
  }
  /// Every timing of its search (empty until one ran).
  const std::vector<candidate_time>& log() const noexcept { return m_search.log; }
  /// What runs now.
  kernel_algorithm algorithm() const { return {selected().describe(), m_search.chosen_by, m_search.searched_seconds}; }

 private:
  std::vector<launch_shape> m_shapes;
  std::size_t m_selected = 0;
  search_record m_search;
};

/// What every operation on gpucmp's own kernels (RMSNorm, RoPE, SwiGLU) answers the same way:
/// its problem's work and axes, its launch shapes as candidates, always searched with its
/// search settings. An operation derives from it and adds its name, run, check and tensors.
template <class Problem>
class kernel_operation {
 public:
  gpucmp::work work() const { return m_problem.work(); }       ///< the problem's
  std::vector<axis> axes() const { return m_problem.axes(); }  ///< the problem's
  std::string sweep_axis() const { return "tokens"; }          ///< what a sweep varies
  std::string provider() const { return "gpucmp kernel"; }     ///< what runs it
  std::size_t candidate_count() const noexcept { return m_candidates.size(); }  ///< launch shapes
  std::string describe_candidate(std::size_t i) const { return m_candidates.at(i).describe(); }  ///< "256x4v"
  void select(std::size_t i, cudaStream_t /*stream*/) { m_candidates.select(i); }  ///< runs shape i from now on
  algorithm_choice choice() const noexcept { return algorithm_choice::search; }   ///< always searched
  const search_options& search_settings() const noexcept { return m_search; }     ///< how it is searched
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& c, std::vector<candidate_time> log) { m_candidates.adopt(c, std::move(log)); }
  const std::vector<candidate_time>& search_log() const noexcept { return m_candidates.log(); }  ///< its search
  kernel_algorithm algorithm() const { return m_candidates.algorithm(); }  ///< what runs now
  const Problem& problem() const noexcept { return m_problem; }            ///< what it computes

 protected:
  /// `p` validated first, then its `shapes` (named `what` in errors) and `search`.
  kernel_operation(const Problem& p, std::vector<launch_shape> shapes, const std::string& what, search_options search)
      : m_problem((p.validate(), p)), m_search(search), m_candidates(std::move(shapes), what) {}

  Problem m_problem;
  search_options m_search;
  kernel_candidates m_candidates;
};

/// The largest block `kernel` launches with on the current device, as the driver sees the
/// loaded function (its registers decide; under compute-sanitizer, the tool's too): a shape
/// with more threads is left out of the candidates rather than failing in every search.
template <class Kernel>
int block_limit(Kernel* kernel) {
  cudaFuncAttributes a{};
  GPUCMP_CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel)));
  return a.maxThreadsPerBlock;
}

/// Search settings for kernels that stream memory: each shape timed once, the verified
/// fastest kept (memory_search_defaults()'s rule: no re-timing, no duel).
inline search_options streaming_kernel_search() {
  search_options s;
  s.refine_rounds = 0;
  s.duel_contenders = 0;
  return s;
}

}  // namespace gpucmp
