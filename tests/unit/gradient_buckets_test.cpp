// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Data-parallel gradient buckets (training/gradient_buckets.hpp) on a synthetic backward pass.
#include "catch.hpp"

#include <gpucmp/training/gradient_buckets.hpp>

#include <vector>

namespace {

// Five backward pieces, last layer first, and a trailing one that finishes nothing: filters
// of 2 bytes at [90, 100), a gradient sum, the batch norm floats [8, 10) and [10, 12), filters
// [80, 90), filters [0, 80), another gradient sum.
std::vector<std::vector<gpucmp::gradient_span>> backward_pass() {
  return {{{true, 90, 10}}, {}, {{false, 8, 2}, {false, 10, 2}}, {{true, 80, 10}}, {{true, 0, 80}}, {}};
}

}  // namespace

TEST_CASE("gradient buckets close once they hold the bucket's bytes, after the piece that finishes their last gradient",
          "[training][data_parallel]") {
  const auto buckets = gpucmp::plan_gradient_buckets(backward_pass(), 2, 40);
  REQUIRE(buckets.size() == 2);
  // 20 + 8 + 8 + 20 = 56 bytes >= 40 after piece 3; adjacent spans merged into one call each.
  CHECK(buckets[0].after_piece == 3);
  CHECK(buckets[0].bytes == 56);
  CHECK(buckets[0].spans == std::vector<gpucmp::gradient_span>{{true, 80, 20}, {false, 8, 4}});
  // The rest closes with the last piece that finishes a gradient, not the trailing sum.
  CHECK(buckets[1].after_piece == 4);
  CHECK(buckets[1].bytes == 160);
  CHECK(buckets[1].spans == std::vector<gpucmp::gradient_span>{{true, 0, 80}});
}

TEST_CASE("one bucket when its size is 0, and every gradient in exactly one bucket", "[training][data_parallel]") {
  const auto one = gpucmp::plan_gradient_buckets(backward_pass(), 2, 0);
  REQUIRE(one.size() == 1);
  CHECK(one[0].after_piece == 4);
  CHECK(one[0].bytes == 216);
  std::size_t filters = 0, floats = 0;
  for (const auto& s : one[0].spans) (s.filters ? filters : floats) += s.count;
  CHECK(filters == 100);
  CHECK(floats == 4);
  // A bucket per piece when the size is one byte: each closes where its gradient is finished.
  const auto each = gpucmp::plan_gradient_buckets(backward_pass(), 2, 1);
  REQUIRE(each.size() == 4);
  CHECK(each[0].after_piece == 0);
  CHECK(each[1].after_piece == 2);
  CHECK(each[2].after_piece == 3);
  CHECK(each[3].after_piece == 4);
  CHECK(gpucmp::plan_gradient_buckets({{}, {}}, 2, 1).empty());
  CHECK_THROWS_AS(gpucmp::plan_gradient_buckets(backward_pass(), 0, 1), gpucmp::invalid_argument);
}
