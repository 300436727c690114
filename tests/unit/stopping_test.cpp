// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/measure/stopping.hpp>

#include <optional>

namespace {
gpucmp::measure_options fast_options() {
  gpucmp::measure_options o;
  o.min_samples = 10;
  o.min_gpu_time_s = 1.0 / 1024;  // binary fractions keep the sums below exact
  o.target_noise = 0.01;
  o.max_wall_time_s = 100;
  return o;
}

// Feeds samples from `next(i)` until the rule stops; returns (reason, samples taken).
template <class Next>
std::pair<gpucmp::stop_reason, std::size_t> run_until_stop(gpucmp::stopping_rule& rule, Next next,
                                                           double wall_per_sample_s = 0.0) {
  for (std::size_t i = 0;; ++i) {
    const double s = next(i);
    rule.add(s, s);
    if (auto reason = rule.check(wall_per_sample_s * static_cast<double>(i + 1))) return {*reason, rule.count()};
  }
}
}  // namespace

TEST_CASE("steady samples converge once min_samples and min_gpu_time are met", "[stopping]") {
  gpucmp::stopping_rule rule(fast_options());
  // 2^-17 s samples: min_gpu_time (2^-10 s) needs 128 samples, which is the binding minimum.
  const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1.0 / 131072; });
  CHECK(reason == gpucmp::stop_reason::converged);
  CHECK(n == 128);
}

TEST_CASE("the rule never stops before min_samples", "[stopping]") {
  auto o = fast_options();
  o.min_gpu_time_s = 0;
  o.min_samples = 25;
  gpucmp::stopping_rule rule(o);
  const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1e-3; });
  CHECK(reason == gpucmp::stop_reason::converged);
  CHECK(n == 25);
}

TEST_CASE("irreducible noise stops at a plateau, not at the wall cap", "[stopping]") {
  gpucmp::stopping_rule rule(fast_options());
  // Alternating +-10 %: relative noise ~10 %, far above the 1 % target, and stable.
  const auto [reason, n] = run_until_stop(rule, [](std::size_t i) { return i % 2 ? 1.1e-3 : 0.9e-3; });
  CHECK(reason == gpucmp::stop_reason::noise_plateau);
  CHECK(n >= gpucmp::stopping_rule::plateau_min_factor * 10);
  CHECK(rule.relative_noise() == Approx(0.1).epsilon(0.02));
}

TEST_CASE("noise that is still falling keeps sampling", "[stopping]") {
  gpucmp::stopping_rule rule(fast_options());
  // 40 samples: one outlier early on, then steady values. Noise at 20 vs 40 samples
  // differs by far more than the plateau tolerance, so sampling continues.
  for (int i = 0; i < 40; ++i) rule.add(i == 0 ? 2e-3 : 1e-3, 1e-3);
  CHECK(rule.relative_noise() > 0.01);
  CHECK_FALSE(rule.check(0.0).has_value());
}

TEST_CASE("the wall-clock cap stops a slow measurement", "[stopping]") {
  auto o = fast_options();
  o.max_wall_time_s = 0.5;
  gpucmp::stopping_rule rule(o);
  const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1e-6; }, /*wall per sample*/ 0.1);
  CHECK(reason == gpucmp::stop_reason::wall_time_cap);
  CHECK(n == 5);
}

TEST_CASE("max_samples caps sampling", "[stopping]") {
  auto o = fast_options();
  o.min_samples = 5;
  o.max_samples = 7;
  o.min_gpu_time_s = 10;  // unreachable
  gpucmp::stopping_rule rule(o);
  const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1e-6; });
  CHECK(reason == gpucmp::stop_reason::max_samples);
  CHECK(n == 7);
}

TEST_CASE("a fixed window stops once its GPU time is measured, whatever the noise", "[stopping]") {
  auto o = fast_options();
  o.window_s = 1.0 / 64;  // 2^-6 s of 2^-10 s samples: 16 samples, more than min_samples
  {
    gpucmp::stopping_rule rule(o);
    // Steady samples converge by the noise rule at 10; the window still wants its 16.
    const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1.0 / 1024; });
    CHECK(reason == gpucmp::stop_reason::fixed_window);
    CHECK(n == 16);
  }
  {
    gpucmp::stopping_rule rule(o);
    // +-50 % noise never converges, and a plateau is not waited for either.
    const auto [reason, n] = run_until_stop(rule, [](std::size_t i) { return i % 2 ? 1.5 / 1024 : 0.5 / 1024; });
    CHECK(reason == gpucmp::stop_reason::fixed_window);
    CHECK(n == 16);
  }
  {
    // Long samples: min_samples still binds after the window is full.
    o.window_s = 1.0 / 1024;
    gpucmp::stopping_rule rule(o);
    const auto [reason, n] = run_until_stop(rule, [](std::size_t) { return 1.0 / 256; });
    CHECK(reason == gpucmp::stop_reason::fixed_window);
    CHECK(n == 10);
  }
  {
    // The caps still apply.
    o.window_s = 1;
    o.max_samples = 12;
    gpucmp::stopping_rule rule(o);
    CHECK(run_until_stop(rule, [](std::size_t) { return 1e-6; }).first == gpucmp::stop_reason::max_samples);
  }
}

TEST_CASE("the stopping rule validates its options", "[stopping]") {
  auto o = fast_options();
  o.target_noise = 0;
  CHECK_THROWS_WITH(gpucmp::stopping_rule(o), GPUCMP_CONTAINS("target_noise"));
}

TEST_CASE("stop reasons have stable names", "[stopping]") {
  CHECK(std::string(gpucmp::to_string(gpucmp::stop_reason::converged)) == "converged");
  CHECK(std::string(gpucmp::to_string(gpucmp::stop_reason::noise_plateau)) == "noise_plateau");
  CHECK(std::string(gpucmp::to_string(gpucmp::stop_reason::wall_time_cap)) == "wall_time_cap");
  CHECK(std::string(gpucmp::to_string(gpucmp::stop_reason::max_samples)) == "max_samples");
  CHECK(std::string(gpucmp::to_string(gpucmp::stop_reason::fixed_window)) == "fixed_window");
}

TEST_CASE("lockstep options stop at exactly the sample count, whatever the noise, the GPU time or the wall clock",
          "[stopping][lockstep]") {
  gpucmp::measure_options o;
  o.power = true;
  o.window_s = 2;
  o.warmup_time_s = 1;
  gpucmp::make_lockstep(o, 30, 20);
  o.validate();
  CHECK(o.batch == 20);
  CHECK(o.warmup_launches == 5);
  CHECK(o.warmup_time_s == 0);
  CHECK_FALSE(o.power);
  CHECK(o.window_s == 0);
  CHECK_FALSE(o.hold);
  // Steady samples would converge after 10; noisy ones would run to a plateau; an hour of
  // wall time per sample would hit the default cap after one. Each stops at 30.
  for (double wall_per_sample : {0.0, 3600.0}) {
    gpucmp::stopping_rule steady(o), noisy(o);
    CHECK(run_until_stop(steady, [](std::size_t) { return 1e-3; }, wall_per_sample) ==
          std::pair{gpucmp::stop_reason::max_samples, std::size_t{30}});
    CHECK(run_until_stop(noisy, [](std::size_t i) { return i % 2 ? 1e-3 : 5e-3; }, wall_per_sample) ==
          std::pair{gpucmp::stop_reason::max_samples, std::size_t{30}});
  }
  gpucmp::measure_options bad;
  CHECK_THROWS_AS(gpucmp::make_lockstep(bad, 0, 1), gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::make_lockstep(bad, 10, 0), gpucmp::invalid_argument);
  CHECK_THROWS_WITH(gpucmp::make_lockstep(bad, 10, 100000), GPUCMP_CONTAINS("above max_batch"));
}
