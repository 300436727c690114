// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/cuda/random.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

TEST_CASE("random values depend only on seed and index", "[random]") {
  std::vector<float> whole(1000), part(500);
  gpucmp::generate_random(whole.data(), whole.size(), 42, 0);
  gpucmp::generate_random(part.data(), part.size(), 42, 500);  // a chunk generated on its own
  for (std::size_t i = 0; i < part.size(); ++i) REQUIRE(part[i] == whole[500 + i]);
  std::vector<float> other(1000);
  gpucmp::generate_random(other.data(), other.size(), 43, 0);
  CHECK(other != whole);
}

TEST_CASE("floating values are uniform between -1 and 1 and never zero", "[random]") {
  std::vector<double> v(100000);
  gpucmp::generate_random(v.data(), v.size(), 7, 0);
  double sum = 0, lo = 1, hi = -1;
  std::size_t zeros = 0;
  for (double x : v) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    zeros += x == 0.0;
  }
  CHECK(lo >= -1.0);
  CHECK(hi < 1.0);
  CHECK(lo < -0.999);
  CHECK(hi > 0.999);
  CHECK(sum / v.size() == Approx(0.0).margin(0.01));  // mean of U(-1,1): sd/sqrt(n) ~ 0.002
  CHECK(zeros == 0);
}

TEST_CASE("integer values cover the type's whole range by default", "[random]") {
  std::vector<std::int8_t> v(20000);
  gpucmp::generate_random(v.data(), v.size(), 1, 0);
  const std::set<int> seen(v.begin(), v.end());
  CHECK(seen.size() == 256);
}

TEST_CASE("a custom range is respected", "[random]") {
  std::vector<int> v(10000);
  gpucmp::generate_random<int>(v.data(), v.size(), 3, 0, {-2, 2});
  const std::set<int> seen(v.begin(), v.end());
  CHECK(seen == std::set<int>{-2, -1, 0, 1, 2});
}

TEST_CASE("half and bfloat16 values are converted from the same stream", "[random]") {
  std::vector<__half> h(64);
  std::vector<__nv_bfloat16> b(64);
  std::vector<float> f(64);
  gpucmp::generate_random(h.data(), h.size(), 9, 0);
  gpucmp::generate_random(b.data(), b.size(), 9, 0);
  gpucmp::generate_random(f.data(), f.size(), 9, 0);
  for (std::size_t i = 0; i < f.size(); ++i) {
    CHECK(__half2float(h[i]) == Approx(f[i]).margin(1e-3));
    CHECK(__bfloat162float(b[i]) == Approx(f[i]).margin(1e-2));
  }
}
