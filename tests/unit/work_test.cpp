// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/specs/work.hpp>

#include <limits>

TEST_CASE("rates divide declared work by time", "[work]") {
  gpucmp::work w;
  w.flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  w.bytes_read = 3e9;
  w.bytes_written = 1e9;
  w.items = 256;
  const gpucmp::rates r = gpucmp::rates_for(w, 2e-3);
  CHECK(r.flop_per_s == Approx(w.flops / 2e-3));
  CHECK(r.bytes_per_s == Approx(2e12));  // read + written
  CHECK(r.items_per_s == Approx(128000));
}

TEST_CASE("declared work is validated", "[work]") {
  gpucmp::work w;
  CHECK(w.empty());
  w.bytes_read = -1;
  CHECK_THROWS_WITH(w.validate(), GPUCMP_CONTAINS("work.bytes_read"));
  w.bytes_read = 1;
  w.flops = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(gpucmp::rates_for(w, 1.0), GPUCMP_CONTAINS("work.flops"));
  w.flops = 1;
  CHECK_THROWS_WITH(gpucmp::rates_for(w, 0.0), GPUCMP_CONTAINS("seconds must be finite and > 0"));
}
