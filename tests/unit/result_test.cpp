// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/measure/result.hpp>

#include <string>

TEST_CASE("a new measurement record is an ok, empty hot measurement", "[result]") {
  const gpucmp::measurement m;
  CHECK(m.ok());
  CHECK(m.timing_mode == gpucmp::mode::hot);
  CHECK(m.gpu_s.empty());
  CHECK(m.launches == 0);
  CHECK(m.batch == 1);
  CHECK_FALSE(m.stream_held);
}

TEST_CASE("result statuses have the names reports print", "[result]") {
  CHECK(std::string(gpucmp::to_string(gpucmp::result_status::ok)) == "ok");
  CHECK(std::string(gpucmp::to_string(gpucmp::result_status::failed)) == "failed");
  CHECK(std::string(gpucmp::to_string(gpucmp::result_status::unsupported)) == "unsupported");
  CHECK(std::string(gpucmp::to_string(gpucmp::result_status::out_of_memory)) == "oom");
  CHECK(std::string(gpucmp::to_string(gpucmp::result_status::skipped)) == "skipped");
}

TEST_CASE("a failed record is not ok and keeps its samples", "[result]") {
  gpucmp::measurement m;
  m.gpu_s = {1e-6, 2e-6};
  m.status = gpucmp::result_status::failed;
  m.message = "hold timed out";
  CHECK_FALSE(m.ok());
  CHECK(m.gpu_s.size() == 2);
}
