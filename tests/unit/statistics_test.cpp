// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/measure/statistics.hpp>

#include <cmath>
#include <limits>
#include <vector>

TEST_CASE("summarize computes order statistics and moments", "[statistics]") {
  // 1..10 shuffled: mean 5.5, sample stddev sqrt(55/6), median 5.5.
  const gpucmp::summary s = gpucmp::summarize({7, 3, 10, 1, 5, 9, 2, 8, 4, 6});
  CHECK(s.count == 10);
  CHECK(s.mean == Approx(5.5));
  CHECK(s.stddev == Approx(std::sqrt(55.0 / 6.0)));
  CHECK(s.min == 1);
  CHECK(s.max == 10);
  CHECK(s.median == Approx(5.5));
  // Type-7 quantiles: position q * (n - 1).
  CHECK(s.p10 == Approx(1.9));
  CHECK(s.p90 == Approx(9.1));
  CHECK(s.p99 == Approx(9.91));
  CHECK(s.relative_noise == Approx(std::sqrt(55.0 / 6.0) / 5.5));
}

TEST_CASE("summarize of one sample has zero spread", "[statistics]") {
  const gpucmp::summary s = gpucmp::summarize({2.5e-6});
  CHECK(s.count == 1);
  CHECK(s.stddev == 0);
  CHECK(s.relative_noise == 0);
  CHECK(s.min == s.max);
  CHECK(s.p99 == 2.5e-6);
}

TEST_CASE("quantile_sorted interpolates between closest ranks", "[statistics]") {
  const std::vector<double> sorted{10, 20, 30, 40};
  CHECK(gpucmp::quantile_sorted(sorted, 0.0) == 10);
  CHECK(gpucmp::quantile_sorted(sorted, 1.0) == 40);
  CHECK(gpucmp::quantile_sorted(sorted, 0.5) == Approx(25));
  CHECK(gpucmp::quantile_sorted(sorted, 1.0 / 3.0) == Approx(20));
  CHECK_THROWS_AS(gpucmp::quantile_sorted(sorted, 1.5), gpucmp::invalid_argument);
}

TEST_CASE("summarize rejects empty and non-finite sample sets", "[statistics]") {
  CHECK_THROWS_WITH(gpucmp::summarize({}), GPUCMP_CONTAINS("empty sample set"));
  CHECK_THROWS_WITH(gpucmp::summarize({1.0, std::numeric_limits<double>::quiet_NaN()}),
                    GPUCMP_CONTAINS("non-finite"));
  CHECK_THROWS_AS(gpucmp::summarize({std::numeric_limits<double>::infinity()}), gpucmp::invalid_argument);
}
