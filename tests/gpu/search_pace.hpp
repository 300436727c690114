// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// An operation's algorithm search paces itself by wall time: each candidate runs until its
// batches are long enough, long calls are sustained and duel. Under a sanitizer
// (GPUCMP_TEST_NO_TIMING=1) every call is slow, so every candidate counts as long, and one
// GEMM's search runs each candidate about 9 times and its leaders about 20 times more, none
// of which is checked there. paced() keeps every step of the search (each candidate, the
// re-timing, the duel) and runs each the fewest times; with timing checks on it changes
// nothing.
#pragma once

#include "catch.hpp"

#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/operation.hpp>

#include <algorithm>
#include <type_traits>
#include <utility>

namespace gpucmp_test {

/// `options` (a search_options, or a gemm_options, conv_options, network_options: anything
/// with a `search`), paced for a sanitizer run when timing checks are off.
template <class Options>
Options paced(Options options) {
  if (timing_checks_on()) return options;
  gpucmp::search_options* search = nullptr;
  if constexpr (std::is_same_v<Options, gpucmp::search_options>) {
    search = &options;
  } else {
    search = &options.search;
  }
  gpucmp::search_options& s = *search;
  s.trials = 1;
  s.sustain_seconds = 0;
  s.min_batch_seconds = 0;
  s.refine_rounds = std::min(s.refine_rounds, 1);
  s.duel_timings = std::min(s.duel_timings, 2);  // one timing in each of the two spells
  s.duel_spell_seconds = 0;
  return options;
}

/// `op` (an operation, gpucmp/ops/operation.hpp) with its algorithm chosen as its options ask,
/// through the process's engine: for a temporary, `variants(chosen(gpucmp::gemm(...)))`.
template <class Op>
Op&& chosen(Op&& op) {
  gpucmp::choose_algorithm(op);
  return std::forward<Op>(op);
}

}  // namespace gpucmp_test
