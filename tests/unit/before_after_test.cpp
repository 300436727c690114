// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The before/after verdict (measure/before_after.hpp): the rank statistics against textbook
// values, and the verdicts on simulated runs shaped like the H200's: two runs of one binary
// (within-run noise, and a drift between runs larger than that noise) come out SAME, and a
// 5 % slower kernel comes out SLOWER, whatever the seed.
#include "catch.hpp"

#include <gpucmp/measure/before_after.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace {

// `count` times around `median` with relative noise `noise` (log-normal), and now and then a
// slow outlier, as a GPU's samples have (a clock step, a host interrupt).
std::vector<double> run_of(std::mt19937_64& rng, std::size_t count, double median, double noise) {
  std::normal_distribution<double> spread(0, noise);
  std::uniform_real_distribution<double> chance(0, 1);
  std::vector<double> out;
  for (std::size_t i = 0; i < count; ++i) {
    double t = median * std::exp(spread(rng));
    if (chance(rng) < 0.02) t *= 1.5;
    out.push_back(t);
  }
  return out;
}

}  // namespace

TEST_CASE("the rank statistics match the textbook's", "[before_after]") {
  // Fully separated sets of five: U = 25; R's wilcox.test(correct = TRUE, exact = FALSE) gives
  // p = 0.01219 for them.
  const std::vector<double> low = {1, 2, 3, 4, 5}, high = {6, 7, 8, 9, 10};
  const gpucmp::sample_change c = gpucmp::compare_samples(low, high);
  CHECK(c.p_value == Approx(0.01219).epsilon(0.001));
  // Hodges-Lehmann: the median of the 25 ratios high/low.
  std::vector<double> ratios;
  for (double b : low)
    for (double a : high) ratios.push_back(a / b);
  std::sort(ratios.begin(), ratios.end());
  CHECK(c.ratio == Approx(ratios[12]).epsilon(1e-12));
  // A set of five against five is too small for a 99 % interval: no verdict.
  CHECK(c.call == gpucmp::verdict::uncertain);
  CHECK(c.why.find("too few samples") != std::string::npos);
  CHECK(gpucmp::detail::normal_quantile(0.995) == Approx(2.5758293).epsilon(1e-7));
}

TEST_CASE("a run exactly 10 % slower reads x1.1 with a point interval: SLOWER", "[before_after]") {
  std::mt19937_64 rng(7);
  const std::vector<double> before = run_of(rng, 40, 1e-3, 0.003);
  std::vector<double> after;
  for (double t : before) after.push_back(t * 1.1);
  const gpucmp::sample_change c = gpucmp::compare_samples(before, after);
  CHECK(c.ratio == Approx(1.1).epsilon(1e-9));
  CHECK(c.ratio_low > 1.02);
  CHECK(c.call == gpucmp::verdict::slower);
  // And the other way round, FASTER.
  CHECK(gpucmp::compare_samples(after, before).call == gpucmp::verdict::faster);
}

TEST_CASE("two runs of one binary come out SAME, a 5 % slower kernel SLOWER", "[before_after]") {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> drift(-0.01, 0.01);  // between runs: clocks, placement
  std::uniform_int_distribution<std::size_t> count(10, 400);
  std::size_t same = 0, slower = 0, trials = 300;
  for (std::size_t i = 0; i < trials; ++i) {
    const double noise = i % 3 == 0 ? 0.02 : 0.004;
    const auto a = run_of(rng, count(rng), 1e-4, noise);
    const auto b = run_of(rng, count(rng), 1e-4 * (1 + drift(rng)), noise);
    const gpucmp::verdict v = gpucmp::compare_samples(a, b).call;
    same += v == gpucmp::verdict::same ? 1 : 0;
    slower += v == gpucmp::verdict::slower ? 1 : 0;
    // The rank test alone would call many of these different: that is what the threshold is for.
  }
  CHECK(slower == 0);
  CHECK(double(same) >= 0.95 * double(trials));
  std::size_t caught = 0;
  for (std::size_t i = 0; i < trials; ++i) {
    const auto a = run_of(rng, count(rng), 1e-4, 0.004);
    const auto b = run_of(rng, count(rng), 1.05e-4 * (1 + drift(rng)), 0.004);
    caught += gpucmp::compare_samples(a, b).call == gpucmp::verdict::slower ? 1 : 0;
  }
  CHECK(double(caught) >= 0.95 * double(trials));
}

TEST_CASE("a change inside the samples' own spread is not called", "[before_after]") {
  std::mt19937_64 rng(11);
  // 10 % noise: a 5 % shift is within what one sample says about another.
  const auto a = run_of(rng, 300, 1e-3, 0.10);
  const auto b = run_of(rng, 300, 1.05e-3, 0.10);
  const gpucmp::sample_change c = gpucmp::compare_samples(a, b);
  CHECK(c.threshold > 0.05);
  CHECK(c.call != gpucmp::verdict::slower);
  // A smaller stated change does not override the spread: the threshold is the larger one.
  gpucmp::change_options strict;
  strict.min_change = 0.001;
  CHECK(gpucmp::compare_samples(a, b, strict).threshold == Approx(c.threshold));
}

TEST_CASE("a few-microsecond row is held to the smallest absolute change as well", "[before_after]") {
  std::mt19937_64 rng(19);
  // A 5.6 µs launch moving by 0.18 µs between two runs of one binary (3.3 %), as on the H200.
  const auto a = run_of(rng, 200, 5.6e-6, 0.003);
  const auto b = run_of(rng, 200, 5.6e-6 * 1.033, 0.003);
  const gpucmp::sample_change c = gpucmp::compare_samples(a, b);
  CHECK(c.threshold == Approx(0.25e-6 / 5.6e-6).epsilon(0.02));
  CHECK(c.call == gpucmp::verdict::same);
  gpucmp::change_options relative_only;
  relative_only.min_change_s = 0;
  CHECK(gpucmp::compare_samples(a, b, relative_only).call == gpucmp::verdict::slower);
  // At 100 µs the absolute floor is 0.25 %: the relative 2 % decides.
  CHECK(gpucmp::compare_samples(run_of(rng, 50, 1e-4, 0.003), run_of(rng, 50, 1e-4, 0.003)).threshold == Approx(0.02));
}

TEST_CASE("an outlier does not move the verdict; bad input is named", "[before_after]") {
  std::mt19937_64 rng(3);
  auto a = run_of(rng, 100, 1e-3, 0.003);
  auto b = run_of(rng, 100, 1e-3, 0.003);
  b[50] = 1.0;  // one sample a thousand times slower
  CHECK(gpucmp::compare_samples(a, b).call == gpucmp::verdict::same);
  CHECK(gpucmp::compare_samples({1e-3, 1e-3, 1e-3}, b).why.find("fewer than 5") != std::string::npos);
  a[3] = 0;
  CHECK_THROWS_WITH(gpucmp::compare_samples(a, b), GPUCMP_CONTAINS("not a finite number > 0"));
  gpucmp::change_options bad;
  bad.confidence = 1.5;
  CHECK_THROWS_WITH(gpucmp::compare_samples(b, b, bad), GPUCMP_CONTAINS("confidence must lie in (0.5, 1)"));
}

TEST_CASE("more samples than the comparison reads are thinned evenly, not cut", "[before_after]") {
  std::vector<double> a(3 * gpucmp::max_compared_samples), b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = 1e-3 * (1 + 0.001 * double(i % 7));
    // The second run slows down in its last third: a cut at the first 2000 samples would miss it.
    b[i] = i < 2 * a.size() / 3 ? a[i] : a[i] * 1.3;
  }
  const gpucmp::sample_change c = gpucmp::compare_samples(a, b);
  // The slow third is in the pairs: the rank test sees it. Cut at the first 2000 samples, the
  // two sets would be the same values and p would be 1.
  CHECK(c.p_value < 1e-6);
  const std::vector<double> first_a(a.begin(), a.begin() + 2000), first_b(b.begin(), b.begin() + 2000);
  CHECK(gpucmp::compare_samples(first_a, first_b).p_value > 0.5);
}
