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

TEST_CASE("kernel names are demangled; plain names pass through", "[kernel_profile]") {
  CHECK(gpucmp::demangle("_ZN6gpucmp7kernels8spin_forEm") == "gpucmp::kernels::spin_for(unsigned long)");
  CHECK(gpucmp::demangle("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64") ==
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64");
  CHECK(gpucmp::demangle(nullptr).empty());
}
