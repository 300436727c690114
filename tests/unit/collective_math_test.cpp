// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The collective benchmarks' arithmetic on the host (multigpu/collective_math.hpp): nccl-tests'
// bus bandwidth factors and byte counts, the size sweep, and the data check's closed-form
// results, checked against a direct simulation of each collective on fake ranks.
#include "catch.hpp"

#include <gpucmp/multigpu/collective_math.hpp>
#include <gpucmp/multigpu/rank_placement.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// Each collective done by hand over `ranks` host arrays of collective_input().
std::vector<std::vector<double>> simulate(const gpucmp::collective_size& s) {
  const int n = s.ranks;
  std::vector<std::vector<double>> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (std::int64_t i = 0; i < s.input_elements(); ++i) in[std::size_t(r)].push_back(gpucmp::collective_input(r, i));
    out[std::size_t(r)].assign(std::size_t(s.output_elements()), NAN);
  }
  for (int r = 0; r < n; ++r) {
    auto& o = out[std::size_t(r)];
    for (std::int64_t i = 0; i < s.output_elements(); ++i) {
      double v = 0;
      switch (s.kind) {
        case gpucmp::collective::all_reduce:
          for (int k = 0; k < n; ++k) v += in[std::size_t(k)][std::size_t(i)];
          break;
        case gpucmp::collective::reduce:
          if (r != 0) continue;
          for (int k = 0; k < n; ++k) v += in[std::size_t(k)][std::size_t(i)];
          break;
        case gpucmp::collective::broadcast: v = in[0][std::size_t(i)]; break;
        case gpucmp::collective::all_gather: v = in[std::size_t(i / s.count)][std::size_t(i % s.count)]; break;
        case gpucmp::collective::reduce_scatter:
          for (int k = 0; k < n; ++k) v += in[std::size_t(k)][std::size_t(r * s.count + i)];
          break;
        case gpucmp::collective::all_to_all: v = in[std::size_t(i / s.count)][std::size_t(r * s.count + i % s.count)]; break;
        case gpucmp::collective::send_recv: v = in[std::size_t((r + n - 1) % n)][std::size_t(i)]; break;
      }
      o[std::size_t(i)] = v;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("bus bandwidth factors and byte counts are nccl-tests'", "[multigpu][collective]") {
  using gpucmp::collective;
  CHECK(gpucmp::bus_bandwidth_factor(collective::all_reduce, 8) == Approx(1.75));
  CHECK(gpucmp::bus_bandwidth_factor(collective::all_reduce, 2) == 1.0);
  CHECK(gpucmp::bus_bandwidth_factor(collective::all_gather, 8) == Approx(0.875));
  CHECK(gpucmp::bus_bandwidth_factor(collective::reduce_scatter, 2) == 0.5);
  CHECK(gpucmp::bus_bandwidth_factor(collective::all_to_all, 4) == 0.75);
  CHECK(gpucmp::bus_bandwidth_factor(collective::broadcast, 8) == 1.0);
  CHECK(gpucmp::bus_bandwidth_factor(collective::reduce, 8) == 1.0);
  CHECK(gpucmp::bus_bandwidth_factor(collective::send_recv, 2) == 1.0);
  for (collective c : gpucmp::all_collectives()) CHECK(std::isnan(gpucmp::bus_bandwidth_factor(c, 1)));  // n/a
  CHECK_THROWS_AS(gpucmp::bus_bandwidth_factor(collective::all_reduce, 0), gpucmp::invalid_argument);

  // 1 GiB of FP32: all-reduce moves 2^28 elements per rank; all-gather's 1 GiB is the whole
  // array, 2^27 elements sent by each of 2 ranks.
  const gpucmp::collective_size ar = gpucmp::size_for_bytes(collective::all_reduce, 2, std::size_t{1} << 30, 4);
  CHECK(ar.count == (std::int64_t{1} << 28));
  CHECK(ar.bytes() == double(std::size_t{1} << 30));
  const gpucmp::collective_size ag = gpucmp::size_for_bytes(collective::all_gather, 2, std::size_t{1} << 30, 4);
  CHECK(ag.count == (std::int64_t{1} << 27));
  CHECK(ag.bytes() == double(std::size_t{1} << 30));
  CHECK(ag.input_elements() == ag.count);
  CHECK(ag.output_elements() == 2 * ag.count);
  const gpucmp::collective_size rs = gpucmp::size_for_bytes(collective::reduce_scatter, 4, 4096, 2);
  CHECK(rs.count == 512);
  CHECK(rs.input_elements() == 2048);
  CHECK(rs.output_elements() == 512);
  CHECK(gpucmp::size_for_bytes(collective::all_reduce, 2, 1, 4).count == 1);  // at least one element

  // 1 GiB all-reduced in 3.3 ms on 2 ranks: algbw 325 GB/s, busbw the same (factor 1).
  const gpucmp::collective_rates rates = gpucmp::rates_for(ar, 3.3e-3);
  CHECK(rates.algbw == Approx(double(std::size_t{1} << 30) / 3.3e-3));
  CHECK(rates.busbw == Approx(rates.algbw));
  CHECK(std::isnan(gpucmp::rates_for(gpucmp::size_for_bytes(collective::all_reduce, 1, 64, 4), 1e-6).busbw));
  CHECK_THROWS_AS(gpucmp::rates_for(ar, 0.0), gpucmp::invalid_argument);
}

TEST_CASE("the size sweep runs 8 B to 8 GiB by doubling and stops at the end", "[multigpu][collective]") {
  const std::vector<std::size_t> sweep = gpucmp::size_sweep();
  REQUIRE(sweep.size() == 31);  // 2^3 .. 2^33
  CHECK(sweep.front() == 8);
  CHECK(sweep.back() == (std::size_t{8} << 30));
  for (std::size_t i = 1; i < sweep.size(); ++i) CHECK(sweep[i] == 2 * sweep[i - 1]);
  CHECK(gpucmp::size_sweep(64, 100, 2) == std::vector<std::size_t>{64});
  CHECK(gpucmp::size_sweep(1, 1000, 10) == std::vector<std::size_t>{1, 10, 100, 1000});
  CHECK(gpucmp::size_sweep(1, SIZE_MAX, 2).size() == 64);  // no overflow at the top
  CHECK_THROWS_AS(gpucmp::size_sweep(0, 8, 2), gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::size_sweep(16, 8, 2), gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::size_sweep(8, 16, 1), gpucmp::invalid_argument);
}

TEST_CASE("the data check's closed-form results equal each collective done by hand on fake ranks", "[multigpu][collective]") {
  for (gpucmp::collective c : gpucmp::all_collectives()) {
    for (int ranks : {1, 2, 3, 8}) {
      const gpucmp::collective_size s = gpucmp::size_for_bytes(c, ranks, 37 * 4 * std::size_t(ranks), 4);
      INFO(gpucmp::to_string(c) << " over " << ranks << " ranks, count " << s.count);
      const auto want = simulate(s);
      for (int r = 0; r < ranks; ++r) {
        for (std::int64_t i = 0; i < s.output_elements(); ++i) {
          const double got = gpucmp::collective_expected(s, r, i), expected = want[std::size_t(r)][std::size_t(i)];
          if (std::isnan(expected)) {
            CHECK(std::isnan(got));  // reduce: only the root's output is defined
          } else {
            CHECK(got == expected);
          }
        }
      }
    }
  }
  // Inputs are small integers, so sums stay exact: at most 16 per rank.
  for (int r = 0; r < 64; ++r)
    for (std::int64_t i = 0; i < 50; ++i) {
      const double v = gpucmp::collective_input(r, i);
      CHECK(v >= 1);
      CHECK(v <= 16);
      CHECK(v == std::floor(v));
    }
  const gpucmp::collective_size s = gpucmp::size_for_bytes(gpucmp::collective::all_reduce, 2, 64, 4);
  CHECK_THROWS_AS(gpucmp::collective_expected(s, 2, 0), gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::collective_expected(s, 0, s.output_elements()), gpucmp::invalid_argument);
  CHECK(gpucmp::parse_collective("all_to_all") == gpucmp::collective::all_to_all);
  CHECK_THROWS_WITH(gpucmp::parse_collective("allreduce"), GPUCMP_CONTAINS("unknown collective 'allreduce'"));
}

TEST_CASE("one process per GPU: local rank k drives device k, and a node with more processes than GPUs is refused",
          "[unit][multigpu]") {
  CHECK(gpucmp::device_for({0, 1, 0, 1}, 1) == 0);
  CHECK(gpucmp::device_for({3, 4, 1, 2}, 2) == 1);  // two nodes of two: world rank 3 is local rank 1
  CHECK(gpucmp::device_for({1, 2, 1, 2}, 8) == 1);  // fewer processes than GPUs: the first ones
  CHECK_THROWS_WITH(gpucmp::device_for({1, 2, 1, 2}, 1), GPUCMP_CONTAINS("2 processes on this node but 1 visible GPU"));
  CHECK_THROWS_WITH(gpucmp::device_for({2, 2, 0, 1}, 1), GPUCMP_CONTAINS("is not a placement"));
  CHECK_THROWS_AS(gpucmp::device_for({0, 1, 0, 3}, 4), gpucmp::invalid_argument);  // more on the node than in the world
}
