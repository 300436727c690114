// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The operation contract: the named phases every verified operation implements, as CUTLASS's
// Operation and cudnn-frontend's build phases spell them out, and the algorithm search as a
// free function over it that times through the engine. An operation's constructor prepares
// (allocates, fills, enumerates its candidates) and times nothing; search() or
// choose_algorithm() then picks the candidate it runs.
//
// An operation type Op (gemm, conv, memory_bandwidth) has, checked by is_operation<Op>:
//   std::string name() const                    "gemm/cublaslt/fp16/8192x8192x8192"
//   gpucmp::work work() const                   one call's declared FLOPs and bytes
//   std::size_t candidate_count() const         candidates enumerated when it was prepared
//   std::string describe_candidate(i) const     what candidate i runs, for the search log
//   int candidate_group(i) const                (optional) candidate i's group, such as its
//                                               library API: each group's fastest is re-timed
//                                               (search_options::refine_group_margin)
//   void select(i, stream)                      run candidate i from now on (may enqueue set-up
//                                               work, such as zeroing a workspace, on stream;
//                                               throws gpucmp::error when i cannot run)
//   void operator()(stream)                     enqueue one call of the selected candidate
//   verification verify(stream)                 poison the output, run, compare with a reference
//   algorithm_choice choice() const             heuristic (candidate 0, untimed) or search
//   const search_options& search_settings() const   how its options ask it to be searched
//   void adopt_search(const search_choice&, std::vector<candidate_time> log)
//                                               keep the search's verdict and every timing
//   const std::vector<candidate_time>& search_log() const   every timing of its search (empty
//                                               until one ran)
//   algorithm() const                           what it runs: .describe(), .chosen_by
// Standalone operations also answer, for a problem and before anything is allocated:
//   static std::string support(problem, options, device)   "" or why this device cannot run it
//   static double bytes_needed(problem, options)           device memory it would allocate
// and their constructor (problem, options, stream) is the prepare phase: it checks both,
// allocates and fills the operands (random, never zero) and enumerates the candidates.
// Layers of a network (fused_conv and linear_layer in models/) have the phases search()
// drives (is_searchable<Op>: all but work, choice and search_settings, which the network
// holds); they are bound to tensors the network's memory plan owns, so the network answers
// support and memory for them.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/progress.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

namespace detail {

template <class Op, class = void>
struct has_search_phases : std::false_type {};

template <class Op>
struct has_search_phases<
    Op, std::void_t<decltype(std::string(std::declval<const Op&>().name())),
                    decltype(std::size_t(std::declval<const Op&>().candidate_count())),
                    decltype(std::string(std::declval<const Op&>().describe_candidate(std::size_t{}))),
                    decltype(std::declval<Op&>().select(std::size_t{}, cudaStream_t{})),
                    decltype(std::declval<Op&>()(cudaStream_t{})),
                    decltype(verification(std::declval<Op&>().verify(cudaStream_t{}))),
                    decltype(std::declval<Op&>().adopt_search(std::declval<const search_choice&>(),
                                                              std::declval<std::vector<candidate_time>>())),
                    decltype(static_cast<const std::vector<candidate_time>&>(std::declval<const Op&>().search_log()))>>
    : std::true_type {};

template <class Op, class = void>
struct has_operation_phases : std::false_type {};

template <class Op>
struct has_operation_phases<
    Op, std::void_t<decltype(gpucmp::work(std::declval<const Op&>().work())),
                    decltype(algorithm_choice(std::declval<const Op&>().choice())),
                    decltype(static_cast<const search_options&>(std::declval<const Op&>().search_settings())),
                    decltype(std::string(std::declval<const Op&>().algorithm().describe())),
                    decltype(algorithm_choice(std::declval<const Op&>().algorithm().chosen_by))>>
    : has_search_phases<Op> {};

template <class Op, class = void>
struct has_candidate_group : std::false_type {};

template <class Op>
struct has_candidate_group<Op, std::void_t<decltype(int(std::declval<const Op&>().candidate_group(std::size_t{})))>>
    : std::true_type {};

/// Candidate i's group (search_options::refine_group_margin): the operation's
/// candidate_group(i) where it has one, else one group for all.
template <class Op>
int candidate_group_of(const Op& op, std::size_t i) {
  if constexpr (has_candidate_group<Op>::value) {
    return int(op.candidate_group(i));
  } else {
    (void)op;
    (void)i;
    return 0;
  }
}

}  // namespace detail

/// True when Op has the phases search() drives: name, candidates, select, run, verify,
/// adopt_search and search_log (a network's layers: this header's opening comment).
template <class Op>
struct is_searchable : detail::has_search_phases<Op> {};

/// True when Op implements the whole operation contract: the search phases plus work(),
/// choice(), search_settings() and algorithm() (this header's opening comment).
template <class Op>
struct is_operation : detail::has_operation_phases<Op> {};

/// Picks `op`'s candidate by the search rule (choose_fastest_verified: the verified fastest,
/// close contenders re-timed, the closest long ones in a sustained duel, the heuristic's
/// first choice as the incumbent where `options` says so), timing every candidate through
/// `eng` (candidate_timer, with `preset`'s hold, power and time budget), and hands the
/// verdict and every timing to the operation. Work queued on any stream is waited for
/// first, so operands filled on the caller's stream are in place; the search itself runs on
/// the engine's stream and leaves it idle. Throws unsupported when no candidate ran and
/// verified, and rethrows a sticky CUDA error.
template <class Operation>
search_choice search(Operation& op, engine& eng, const search_options& options,
                     const measure_options& preset = search_preset()) {
  static_assert(is_searchable<Operation>::value, "search() needs an operation (see gpucmp/ops/operation.hpp)");
  GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto started = std::chrono::steady_clock::now();
  report_progress("searching " + op.name() + ": " + std::to_string(op.candidate_count()) + " candidates");
  candidate_timer timer(eng, options, preset);
  const cudaStream_t s = timer.stream();
  std::vector<candidate_time> log;
  search_choice chosen = choose_fastest_verified(
      op.candidate_count(), [&](std::size_t i) { return op.describe_candidate(i); },
      [&](std::size_t i) {
        op.select(i, s);
        return timer.time(i, [&](cudaStream_t t) { op(t); });
      },
      [&](std::size_t i) {
        op.select(i, s);
        return op.verify(s);
      },
      log, op.name(), options, [&](std::size_t i) { return detail::candidate_group_of(op, i); });
  op.select(chosen.index, s);
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(s));
  chosen.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char took[48];
  std::snprintf(took, sizeof took, " (%.3g us a call; search %.1f s)", chosen.seconds * 1e6, chosen.wall_seconds);
  report_progress(op.name() + ": " + op.describe_candidate(chosen.index) + took);
  op.adopt_search(chosen, std::move(log));
  return chosen;
}

/// search() with the settings `op`'s options ask for.
template <class Operation>
search_choice search(Operation& op, engine& eng) {
  static_assert(is_operation<Operation>::value, "search(op, eng) needs an operation (see gpucmp/ops/operation.hpp)");
  return search(op, eng, op.search_settings());
}

/// Settles `op`'s algorithm as its options ask: with algorithm_choice::search, search(op,
/// eng); with heuristic, nothing (candidate 0, the library heuristic's first choice, runs
/// untimed from the start). `eng` defaults to the process's engine of the current device.
template <class Operation>
void choose_algorithm(Operation& op, engine& eng = shared_engine()) {
  static_assert(is_operation<Operation>::value, "choose_algorithm() needs an operation (see gpucmp/ops/operation.hpp)");
  if (op.choice() == algorithm_choice::search) search(op, eng);
}

/// What prepare_verified() settled.
struct prepared_operation {
  std::optional<search_choice> search;  ///< the search's verdict and wall time (none when its options ask for the heuristic)
  verification check;                   ///< the output check of the algorithm it runs
};

/// The contract's chores before an operation is timed, in one call: settles its algorithm as
/// its options ask (choose_algorithm: by default the timed search, which keeps the verified
/// fastest), then checks the output of the algorithm it will run against its reference and
/// throws verification_failed when it is wrong, so a wrong answer is never timed.
/// gpucmp::run_verified (gbench/verified_run.hpp) adds the declaration and the timing for a
/// benchmark.
template <class Operation>
prepared_operation prepare_verified(Operation& op, engine& eng = shared_engine()) {
  static_assert(is_operation<Operation>::value, "prepare_verified() needs an operation (see gpucmp/ops/operation.hpp)");
  prepared_operation prepared;
  if (op.choice() == algorithm_choice::search) prepared.search = search(op, eng);
  prepared.check = op.verify(eng.stream());
  require_passed(op.name(), prepared.check);
  return prepared;
}

}  // namespace gpucmp
