// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/measure/options.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

TEST_CASE("default measure_options are valid", "[options]") { CHECK_NOTHROW(gpucmp::measure_options{}.validate()); }

TEST_CASE("each invalid option is named in the error", "[options]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct bad_case {
    const char* field;
    std::function<void(gpucmp::measure_options&)> spoil;
  };
  const bad_case cases[] = {
      {"warmup_time_s", [](auto& o) { o.warmup_time_s = -1; }},
      {"cooldown_s", [](auto& o) { o.cooldown_s = -0.5; }},
      {"cooldown_s", [](auto& o) { o.cooldown_s = 3600; }},
      {"window_s", [](auto& o) { o.window_s = -1; }},
      {"window_s", [&](auto& o) { o.window_s = nan; }},
      {"min_samples", [](auto& o) { o.min_samples = 0; }},
      {"max_samples", [](auto& o) { o.max_samples = o.min_samples - 1; }},
      {"min_gpu_time_s", [&](auto& o) { o.min_gpu_time_s = nan; }},
      {"target_noise", [](auto& o) { o.target_noise = 0; }},
      {"max_wall_time_s", [](auto& o) { o.max_wall_time_s = 0; }},
      {"min_sample_time_s", [](auto& o) { o.min_sample_time_s = -1e-3; }},
      {"max_batch", [](auto& o) { o.max_batch = 0; }},
      {"batch", [](auto& o) { o.batch = o.max_batch + 1; }},
      {"hold_timeout_s", [](auto& o) { o.hold_timeout_s = std::numeric_limits<double>::infinity(); }},
      {"settle_s", [](auto& o) { o.settle_s = -1; }},
      {"settle_s", [&](auto& o) { o.settle_s = nan; }},
      {"settle_s", [](auto& o) { o.settle_s = 3600; }},
  };
  for (const auto& c : cases) {
    INFO("field " << c.field);
    gpucmp::measure_options o;
    c.spoil(o);
    CHECK_THROWS_AS(o.validate(), gpucmp::invalid_argument);
    CHECK_THROWS_WITH(o.validate(), GPUCMP_CONTAINS(std::string("measure_options: ") + c.field));
  }
}

TEST_CASE("modes round-trip through their names", "[options]") {
  for (auto m : {gpucmp::mode::cold, gpucmp::mode::hot, gpucmp::mode::graph}) {
    CHECK(gpucmp::parse_mode(gpucmp::to_string(m)) == m);
  }
  CHECK_THROWS_WITH(gpucmp::parse_mode("warm"), GPUCMP_CONTAINS("unknown mode 'warm'"));
}
