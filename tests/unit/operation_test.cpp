// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Host tests of the operation contract's checks (ops/operation.hpp): what makes a type an
// operation that search() can drive, and what the library's operations declare statically
// before anything is allocated. Searching itself needs a GPU (tests/gpu/ops_*_test.cu).
#include "catch.hpp"

#include <gpucmp/ops/operation.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace {

// What an operation runs, as callers read it.
struct simple_algorithm {
  std::string describe() const { return "the only one (search)"; }
  gpucmp::algorithm_choice chosen_by = gpucmp::algorithm_choice::search;
};

// Every phase of the contract.
struct complete_op {
  std::string name() const { return "op"; }
  gpucmp::work work() const { return {}; }
  std::size_t candidate_count() const { return 2; }
  std::string describe_candidate(std::size_t i) const { return std::to_string(i); }
  void select(std::size_t, cudaStream_t) {}
  void operator()(cudaStream_t) {}
  gpucmp::verification verify(cudaStream_t) { return {}; }
  gpucmp::algorithm_choice choice() const { return gpucmp::algorithm_choice::search; }
  const gpucmp::search_options& search_settings() const { return m_search; }
  void adopt_search(const gpucmp::search_choice&, std::vector<gpucmp::candidate_time>) {}
  const std::vector<gpucmp::candidate_time>& search_log() const { return m_log; }
  simple_algorithm algorithm() const { return {}; }
  gpucmp::search_options m_search;
  std::vector<gpucmp::candidate_time> m_log;
};

// Every phase but the algorithm it runs, which run_verified and the benchmarks read.
struct no_algorithm_op {
  std::string name() const { return "op"; }
  gpucmp::work work() const { return {}; }
  std::size_t candidate_count() const { return 2; }
  std::string describe_candidate(std::size_t i) const { return std::to_string(i); }
  void select(std::size_t, cudaStream_t) {}
  void operator()(cudaStream_t) {}
  gpucmp::verification verify(cudaStream_t) { return {}; }
  gpucmp::algorithm_choice choice() const { return gpucmp::algorithm_choice::search; }
  const gpucmp::search_options& search_settings() const { return m_search; }
  void adopt_search(const gpucmp::search_choice&, std::vector<gpucmp::candidate_time>) {}
  const std::vector<gpucmp::candidate_time>& search_log() const { return m_log; }
  gpucmp::search_options m_search;
  std::vector<gpucmp::candidate_time> m_log;
};

// A network's layer: the phases search() drives, without work, choice and settings.
struct layer_op {
  std::string name() const { return "layer"; }
  std::size_t candidate_count() const { return 1; }
  std::string describe_candidate(std::size_t) const { return "only"; }
  void select(std::size_t, cudaStream_t) {}
  void operator()(cudaStream_t) const {}
  gpucmp::verification verify(cudaStream_t) const { return {}; }
  void adopt_search(const gpucmp::search_choice&, std::vector<gpucmp::candidate_time>) {}
  const std::vector<gpucmp::candidate_time>& search_log() const { return m_log; }
  std::vector<gpucmp::candidate_time> m_log;
};

// Takes a search's verdict but keeps no log of it.
struct no_log_op {
  std::string name() const { return "layer"; }
  std::size_t candidate_count() const { return 1; }
  std::string describe_candidate(std::size_t) const { return "only"; }
  void select(std::size_t, cudaStream_t) {}
  void operator()(cudaStream_t) const {}
  gpucmp::verification verify(cudaStream_t) const { return {}; }
  void adopt_search(const gpucmp::search_choice&, std::vector<gpucmp::candidate_time>) {}
};

// Runs and verifies, but cannot take a search's verdict.
struct no_adopt_op {
  std::string name() const { return "op"; }
  std::size_t candidate_count() const { return 1; }
  std::string describe_candidate(std::size_t) const { return "only"; }
  void select(std::size_t, cudaStream_t) {}
  void operator()(cudaStream_t) {}
  gpucmp::verification verify(cudaStream_t) { return {}; }
};

// Candidates, but no way to choose one.
struct no_select_op {
  std::string name() const { return "op"; }
  std::size_t candidate_count() const { return 1; }
  std::string describe_candidate(std::size_t) const { return "only"; }
  void operator()(cudaStream_t) {}
  gpucmp::verification verify(cudaStream_t) { return {}; }
  void adopt_search(const gpucmp::search_choice&, std::vector<gpucmp::candidate_time>) {}
};

// A complete operation whose candidates come in groups (a convolution's two APIs).
struct grouped_op : complete_op {
  int candidate_group(std::size_t i) const { return i == 0 ? 7 : 9; }
};

}  // namespace

TEST_CASE("the operation contract names its phases and the checks tell which a type lacks", "[ops][operation]") {
  STATIC_REQUIRE(gpucmp::is_operation<complete_op>::value);
  STATIC_REQUIRE(gpucmp::is_searchable<complete_op>::value);
  // A layer can be searched, but choose_algorithm() needs its choice and settings.
  STATIC_REQUIRE(gpucmp::is_searchable<layer_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_operation<layer_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_searchable<no_adopt_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_searchable<no_log_op>::value);
  // Searchable, but callers (run_verified, the sweeps) read the algorithm it runs.
  STATIC_REQUIRE(gpucmp::is_searchable<no_algorithm_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_operation<no_algorithm_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_searchable<no_select_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::is_searchable<int>::value);
}

TEST_CASE("an operation may name its candidates' groups; one without is one group", "[ops][operation]") {
  STATIC_REQUIRE(gpucmp::is_operation<grouped_op>::value);
  STATIC_REQUIRE(gpucmp::detail::has_candidate_group<grouped_op>::value);
  STATIC_REQUIRE_FALSE(gpucmp::detail::has_candidate_group<complete_op>::value);
  const grouped_op grouped;
  CHECK(gpucmp::detail::candidate_group_of(grouped, 0) == 7);
  CHECK(gpucmp::detail::candidate_group_of(grouped, 1) == 9);
  const complete_op plain;
  CHECK(gpucmp::detail::candidate_group_of(plain, 0) == 0);
  CHECK(gpucmp::detail::candidate_group_of(plain, 1) == 0);
}
