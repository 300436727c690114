// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/cuda/device.hpp>

TEST_CASE("the device snapshot holds the facts a comparison states", "[gpu][device]") {
  const gpucmp::device_info d = gpucmp::query_current_device();
  INFO(d.name << " " << d.uuid << " sm " << d.sm_count << " L2 " << d.l2_bytes);
  CHECK_FALSE(d.name.empty());
  CHECK(d.uuid.rfind("GPU-", 0) == 0);
  CHECK(d.uuid.size() == 40);
  CHECK(d.pci_bus_id.size() >= 12);
  CHECK(d.cc_major >= 7);
  CHECK(d.sm_count > 0);
  CHECK(d.l2_bytes >= (std::size_t{1} << 20));
  CHECK(d.global_memory_bytes > d.free_memory_bytes);
  CHECK(d.free_memory_bytes > 0);
  CHECK(d.sm_clock_max_hz > 5e8);
  CHECK(d.memory_clock_max_hz > 1e8);
  CHECK(d.memory_bandwidth_bytes_per_s() > 1e11);
  CHECK(d.driver_version >= 12000);
  CHECK(d.runtime_version >= 12000);
  CHECK(gpucmp::no_device_reason().empty());
}

TEST_CASE("selecting a device that does not exist is a clear error", "[gpu][device][api_error]") {
  const int count = gpucmp::device_count();
  REQUIRE(count > 0);
  CHECK_THROWS_WITH(gpucmp::select_device(count),
                    GPUCMP_CONTAINS("device ordinal " + std::to_string(count) + " does not exist"));
  CHECK_THROWS_AS(gpucmp::select_device(-1), gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::query_device(count), gpucmp::invalid_argument);
}

TEST_CASE("device_guard restores the previous device", "[gpu][device]") {
  const int before = gpucmp::current_device();
  {
    gpucmp::device_guard guard(gpucmp::device_count() - 1);
    CHECK(gpucmp::current_device() == gpucmp::device_count() - 1);
  }
  CHECK(gpucmp::current_device() == before);
}
