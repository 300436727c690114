// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/power/clock_events.hpp>
#include <gpucmp/serving/latency.hpp>

#include <string>
#include <vector>

TEST_CASE("clock-event reason bits decode to names", "[clock_events]") {
  CHECK(gpucmp::decode_clock_events(0).empty());
  CHECK(gpucmp::decode_clock_events(0x004 | 0x040) == std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"});
  CHECK(gpucmp::decode_clock_events(0x001) == std::vector<std::string>{"gpu_idle"});
  CHECK(gpucmp::decode_clock_events(0x1000) == std::vector<std::string>{"unknown_0x1000"});
}

TEST_CASE("only power and thermal reasons count as throttled", "[clock_events]") {
  CHECK_FALSE(gpucmp::is_throttled(0));
  CHECK_FALSE(gpucmp::is_throttled(0x001 | 0x002 | 0x010 | 0x100));  // idle, settings, sync boost, display
  for (std::uint64_t bit : {0x004u, 0x008u, 0x020u, 0x040u, 0x080u}) {
    INFO("bit " << bit);
    CHECK(gpucmp::is_throttled(bit));
  }
}

TEST_CASE("latency percentiles and jitter on synthetic data", "[latency]") {
  // 1000 requests: 990 at 1 ms, 9 at 5 ms, 1 at 50 ms.
  std::vector<double> latencies(990, 1e-3);
  latencies.insert(latencies.end(), 9, 5e-3);
  latencies.push_back(50e-3);
  const auto s = gpucmp::summarize_latencies(latencies);
  CHECK(s.count == 1000);
  CHECK(s.p50 == Approx(1e-3));
  CHECK(s.p90 == Approx(1e-3));
  CHECK(s.p99 == Approx(1e-3 + 0.01 * 4e-3));  // position 989.01: between the last 1 ms and the first 5 ms
  CHECK(s.p999 == Approx(5e-3 + 0.001 * 45e-3));
  CHECK(s.max == 50e-3);
  CHECK(s.jitter == Approx(s.p99 / s.p50));
  CHECK_THROWS_AS(gpucmp::summarize_latencies({}), gpucmp::invalid_argument);
}

TEST_CASE("arrival patterns: fixed rate, Poisson and closed loop", "[latency]") {
  const auto fixed = gpucmp::arrival_times(gpucmp::arrival_pattern::fixed_rate, 1000.0, 5);
  CHECK(fixed == std::vector<double>{0.0, 1e-3, 2e-3, 3e-3, 4e-3});
  const auto poisson = gpucmp::arrival_times(gpucmp::arrival_pattern::poisson, 1000.0, 20000, 7);
  REQUIRE(poisson.size() == 20000);
  // Mean inter-arrival 1 ms: 20,000 arrivals span about 20 s (sd of the sum ~ 0.14 s).
  CHECK(poisson.back() == Approx(20.0).epsilon(0.03));
  for (std::size_t i = 1; i < poisson.size(); ++i) REQUIRE(poisson[i] >= poisson[i - 1]);
  CHECK(poisson == gpucmp::arrival_times(gpucmp::arrival_pattern::poisson, 1000.0, 20000, 7));  // deterministic
  CHECK(gpucmp::arrival_times(gpucmp::arrival_pattern::closed_loop, 0, 10).empty());
  CHECK_THROWS_WITH(gpucmp::arrival_times(gpucmp::arrival_pattern::fixed_rate, 0, 10), GPUCMP_CONTAINS("arrival rate"));
}
