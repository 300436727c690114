// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>

#include <string>

TEST_CASE("GPUCMP_CUDA_CHECK throws cuda_error with expression, location, name and text", "[error]") {
  const int line = __LINE__ + 2;
  try {
    GPUCMP_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("no exception");
  } catch (const gpucmp::cuda_error& e) {
    const std::string what = e.what();
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(e.expression() == "cudaErrorInvalidValue");
    CHECK(e.line() == line);
    CHECK_THAT(what, GPUCMP_CONTAINS("cudaErrorInvalidValue"));
    CHECK_THAT(what, GPUCMP_CONTAINS("invalid argument"));
    CHECK_THAT(what, GPUCMP_CONTAINS("error_test.cpp:" + std::to_string(line)));
  }
}

TEST_CASE("GPUCMP_CUDA_CHECK evaluates its argument once and passes on success", "[error]") {
  int calls = 0;
  auto call = [&] {
    ++calls;
    return cudaSuccess;
  };
  CHECK_NOTHROW(GPUCMP_CUDA_CHECK(call()));
  CHECK(calls == 1);
}

TEST_CASE("out_of_memory says what was needed and what was free", "[error]") {
  const gpucmp::out_of_memory e(std::size_t{3} << 30, std::size_t{1} << 29, std::size_t{80} << 30, "device_buffer of 5 elements");
  CHECK(std::string(e.what()) == "oom: device_buffer of 5 elements needs 3.00 GiB, 0.50 GiB free of 80.00 GiB");
  CHECK(e.requested_bytes() == (std::size_t{3} << 30));
  CHECK(e.free_bytes() == (std::size_t{1} << 29));
}

TEST_CASE("every gpucmp error is a gpucmp::error", "[error]") {
  CHECK_THROWS_AS(throw gpucmp::unsupported("fp8 needs sm_89+"), gpucmp::error);
  CHECK_THROWS_WITH(throw gpucmp::unsupported("fp8 needs sm_89+"), "unsupported: fp8 needs sm_89+");
  CHECK_THROWS_AS(throw gpucmp::hold_timeout("x"), gpucmp::error);
  CHECK_THROWS_WITH(throw gpucmp::invalid_argument("n < 0"), "invalid argument: n < 0");
}

TEST_CASE("without an NVIDIA driver the no-device reason says so, not 'insufficient driver'", "[error][device]") {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  const std::string why = gpucmp::no_device_reason();
  if (driver == 0) {  // this machine has no driver (CI's, the project's build machine)
    CHECK_THAT(why, GPUCMP_CONTAINS("no CUDA device: no NVIDIA driver found"));
    CHECK_THAT(why, !GPUCMP_CONTAINS("insufficient"));
  } else {
    // With a driver the reason is either empty (a device) or names what is wrong: never "no driver".
    CHECK_THAT(why, !GPUCMP_CONTAINS("no NVIDIA driver found"));
  }
}
