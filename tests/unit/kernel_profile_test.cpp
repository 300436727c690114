// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/measure/kernel_profile.hpp>

#include <string>
#include <vector>

namespace {
gpucmp::activity_record rec(const char* name, std::uint64_t start, std::uint64_t end, std::uint64_t sample = 0,
                            gpucmp::activity_kind kind = gpucmp::activity_kind::kernel) {
  gpucmp::activity_record r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.sample = sample;
  r.kind = kind;
  return r;
}
}  // namespace

TEST_CASE("busy, span and idle of sequential activities with gaps", "[kernel_profile]") {
  // [0,10) gap [12,20) gap [25,30): busy 23, span 30, idle 7 (ns)
  const auto t = gpucmp::times_of({rec("c", 25, 30), rec("a", 0, 10), rec("b", 12, 20)});
  CHECK(t.activities == 3);
  CHECK(t.busy_s == Approx(23e-9));
  CHECK(t.span_s == Approx(30e-9));
  CHECK(t.idle_s == Approx(7e-9));
}

TEST_CASE("overlapping activities count fully as busy but cover the span once", "[kernel_profile]") {
  // [0,10) and [5,15) overlap, [20,22) after a gap of 5: busy 22, span 22, idle 5
  const auto t = gpucmp::times_of({rec("a", 0, 10), rec("b", 5, 15), rec("c", 20, 22)});
  CHECK(t.busy_s == Approx(22e-9));
  CHECK(t.span_s == Approx(22e-9));
  CHECK(t.idle_s == Approx(5e-9));
  // An activity inside another leaves no gap.
  const auto nested = gpucmp::times_of({rec("outer", 0, 100), rec("inner", 10, 20), rec("next", 100, 110)});
  CHECK(nested.idle_s == 0);
  CHECK(nested.span_s == Approx(110e-9));
}

TEST_CASE("no activity gives zero times", "[kernel_profile]") {
  const auto t = gpucmp::times_of({});
  CHECK(t.activities == 0);
  CHECK(t.busy_s == 0);
  CHECK(t.span_s == 0);
}

TEST_CASE("a breakdown aggregates by name, largest total first, with shares per launch", "[kernel_profile]") {
  std::vector<gpucmp::activity_record> records;
  for (std::uint64_t launch = 0; launch < 4; ++launch) {
    const std::uint64_t t0 = launch * 1000;
    records.push_back(rec("gemm", t0, t0 + 300, launch));                 // 300 ns
    records.push_back(rec("epilogue", t0 + 300, t0 + 350, launch));       // 50 ns
    records.push_back(rec("epilogue", t0 + 350, t0 + 410, launch));       // 60 ns
    records.push_back(rec("[memset]", t0 + 410, t0 + 500, launch, gpucmp::activity_kind::memset));  // 90 ns
  }
  const auto stats = gpucmp::breakdown(records, 4);
  REQUIRE(stats.size() == 3);
  CHECK(stats[0].name == "gemm");
  CHECK(stats[0].count == 4);
  CHECK(stats[0].per_launch == 1.0);
  CHECK(stats[0].total_s == Approx(1200e-9));
  CHECK(stats[0].median_s == Approx(300e-9));
  CHECK(stats[0].share == Approx(1200.0 / 2000.0));
  CHECK(stats[1].name == "epilogue");
  CHECK(stats[1].per_launch == 2.0);
  CHECK(stats[1].median_s == Approx(55e-9));
  CHECK(stats[2].name == "[memset]");
  CHECK(stats[2].kind == gpucmp::activity_kind::memset);
  double shares = 0;
  for (const auto& s : stats) shares += s.share;
  CHECK(shares == Approx(1.0));
}

TEST_CASE("exposed time charges overlapped kernels once: what each ran past the ones before it", "[kernel_profile]") {
  // Programmatic dependent launch: a GEMV [0,100); a norm launched early at 90 that waits for it
  // and runs to 125; the next GEMV launched early at 120, to 220; after a gap, a copy [230,240).
  const std::vector<gpucmp::activity_record> launch{rec("next_gemv", 120, 220), rec("gemv", 0, 100), rec("norm", 90, 125),
                                                    rec("[memcpy]", 230, 240)};
  const std::vector<double> exposed = gpucmp::exposed_times(launch);  // in the records' order
  REQUIRE(exposed.size() == 4);
  CHECK(exposed[0] == Approx(95e-9));  // 125 to 220
  CHECK(exposed[1] == Approx(100e-9));
  CHECK(exposed[2] == Approx(25e-9));  // its 35 ns less the 10 it waited under the GEMV
  CHECK(exposed[3] == Approx(10e-9));
  const auto t = gpucmp::times_of(launch);
  CHECK(exposed[0] + exposed[1] + exposed[2] + exposed[3] == Approx(t.span_s - t.idle_s));
  // Nested in another: nothing of its own. Same start: the shorter first, the longer charged the rest.
  const std::vector<double> nested = gpucmp::exposed_times({rec("outer", 0, 100), rec("inner", 10, 20)});
  CHECK(nested[0] == Approx(100e-9));
  CHECK(nested[1] == 0);
  const std::vector<double> same_start = gpucmp::exposed_times({rec("long", 0, 50), rec("short", 0, 20)});
  CHECK(same_start[0] == Approx(30e-9));
  CHECK(same_start[1] == Approx(20e-9));
  CHECK(gpucmp::exposed_times({}).empty());
}

TEST_CASE("a breakdown sums each name's exposed time over its launches, its share of the covered time", "[kernel_profile]") {
  std::vector<gpucmp::activity_record> records;
  for (std::uint64_t launch = 0; launch < 2; ++launch) {
    const std::uint64_t t0 = launch * 1000;  // launches far apart: nothing overlaps across them
    records.push_back(rec("gemv", t0, t0 + 100, launch));
    records.push_back(rec("norm", t0 + 90, t0 + 125, launch));
  }
  const auto stats = gpucmp::breakdown(records, 2);
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].name == "gemv");
  CHECK(stats[0].exposed_s == Approx(200e-9));
  CHECK(stats[0].exposed_share == Approx(200.0 / 250.0));
  CHECK(stats[1].name == "norm");
  CHECK(stats[1].total_s == Approx(70e-9));  // durations, waits included
  CHECK(stats[1].exposed_s == Approx(50e-9));
  CHECK(stats[1].exposed_share == Approx(50.0 / 250.0));
}

TEST_CASE("kernel names are demangled; plain names pass through", "[kernel_profile]") {
  CHECK(gpucmp::demangle("_ZN6gpucmp7kernels8spin_forEm") == "gpucmp::kernels::spin_for(unsigned long)");
  CHECK(gpucmp::demangle("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64") ==
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64");
  CHECK(gpucmp::demangle(nullptr).empty());
}
