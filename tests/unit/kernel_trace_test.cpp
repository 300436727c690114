// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The absence path of kernel mode, which needs no GPU: a CUPTI that cannot be loaded is a
// typed "kernel mode unavailable" error naming what was tried.
#include "catch.hpp"

#include <gpucmp/measure/kernel_trace.hpp>

#include <string>

TEST_CASE("a missing libcupti is 'kernel mode unavailable' naming the paths tried", "[kernel_trace]") {
  try {
    gpucmp::detail::load_cupti({"/nonexistent/libcupti.so", "libcupti-does-not-exist.so"});
    FAIL("no exception");
  } catch (const gpucmp::unsupported& e) {
    const std::string what = e.what();
    CHECK_THAT(what, GPUCMP_CONTAINS("unsupported: kernel mode unavailable: cannot load CUPTI"));
    CHECK_THAT(what, GPUCMP_CONTAINS("/nonexistent/libcupti.so"));
    CHECK_THAT(what, GPUCMP_CONTAINS("libcupti-does-not-exist.so"));
  }
}

TEST_CASE("a library without the CUPTI functions is rejected", "[kernel_trace]") {
  // libm opens but has none of CUPTI's symbols.
  CHECK_THROWS_WITH(gpucmp::detail::load_cupti({"libm.so.6"}), GPUCMP_CONTAINS("libm.so.6: lacks cuptiGetVersion"));
}

TEST_CASE("including kernel_trace.hpp registers the CUPTI tracer", "[kernel_trace]") {
  CHECK(gpucmp::detail::registered_tracer_factory() == &gpucmp::detail::make_cupti_tracer);
}

TEST_CASE("the library CMake found comes first after the environment override", "[kernel_trace]") {
  const auto candidates = gpucmp::detail::cupti_library_candidates();
  REQUIRE_FALSE(candidates.empty());
#ifdef GPUCMP_CUPTI_LIBRARY
  CHECK(candidates.front() == GPUCMP_CUPTI_LIBRARY);
#endif
  CHECK(candidates.back() == "/usr/local/cuda/lib64/libcupti.so");
}
