// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The shapes a serving step pads up to (models/step_buckets.hpp): decode batches to powers of
// two, prefill prompts to powers of two or 1.5 times one, each within its largest; at most a
// third of a prefill's rows padding; counts outside the range refused by name.
#include "catch.hpp"

#include <gpucmp/models/step_buckets.hpp>

#include <cstdint>
#include <set>

TEST_CASE("step buckets: decode batches go up to powers of two, prefill prompts to 2^k or 1.5 x 2^k", "[models][serving]") {
  CHECK(gpucmp::batch_bucket(1, 64) == 1);
  CHECK(gpucmp::batch_bucket(3, 64) == 4);
  CHECK(gpucmp::batch_bucket(33, 64) == 64);
  CHECK(gpucmp::batch_bucket(33, 48) == 48);  // never past the largest batch
  std::set<std::int64_t> prompts;
  for (std::int64_t t = 1; t <= 4096; ++t) {
    const std::int64_t b = gpucmp::token_bucket(t, 8192);
    INFO("a prompt of " << t << " tokens runs as " << b);
    REQUIRE(b >= t);
    CHECK(3 * (b - t) < b);  // at most a third padding
    prompts.insert(b);
  }
  CHECK(prompts == std::set<std::int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
                                          1536, 2048, 3072, 4096});
  CHECK(gpucmp::token_bucket(1536, 8192) == 1536);  // a bucket is its own
  CHECK(gpucmp::token_bucket(1537, 8192) == 2048);
  CHECK(gpucmp::token_bucket(1900, 2000) == 2000);  // never past the longest step
  CHECK_THROWS_WITH(gpucmp::token_bucket(0, 2048), GPUCMP_CONTAINS("a prompt of 0 tokens, not 1 to 2048"));
  CHECK_THROWS_WITH(gpucmp::token_bucket(2049, 2048), GPUCMP_CONTAINS("a prompt of 2049 tokens"));
  CHECK_THROWS_WITH(gpucmp::batch_bucket(65, 64), GPUCMP_CONTAINS("65 sequences, not 1 to 64"));
}
