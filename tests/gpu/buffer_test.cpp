// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"
#include "test_kernels.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cmath>
#include <vector>

TEST_CASE("a new buffer holds the seed's random values, not zeros", "[gpu][buffer]") {
  gpucmp::device_buffer<float> b(4096, gpucmp::initial_fill::random(5));
  const std::vector<float> got = b.to_host();
  std::vector<float> expected(got.size());
  gpucmp::generate_random(expected.data(), expected.size(), 5, 0);
  CHECK(got == expected);
  std::size_t zeros = 0;
  for (float x : got) zeros += x == 0.0f;
  CHECK(zeros == 0);
}

TEST_CASE("default buffers get different deterministic seeds", "[gpu][buffer]") {
  gpucmp::device_buffer<float> a(256), b(256);
  CHECK(a.to_host() != b.to_host());
}

TEST_CASE("a fill larger than one host chunk matches the stream everywhere", "[gpu][buffer]") {
  const std::size_t n = (std::size_t{40} << 20) + 3;  // 160 MiB of floats: several 32 MiB chunks, ragged end
  gpucmp::device_buffer<float> b(n, gpucmp::initial_fill::random(11));
  const std::vector<float> got = b.to_host();
  for (std::size_t i : {std::size_t{0}, std::size_t{8} << 20, (std::size_t{8} << 20) + 1, n / 2, n - 1}) {
    float expected = 0;
    gpucmp::generate_random(&expected, 1, 11, i);
    INFO("element " << i);
    CHECK(got[i] == expected);
  }
}

TEST_CASE("poison makes every float NaN", "[gpu][buffer]") {
  gpucmp::device_buffer<float> b(1000, gpucmp::initial_fill::poison());
  for (float x : b.to_host()) REQUIRE(std::isnan(x));
}

TEST_CASE("an allocation larger than the device is a typed oom with needed vs free", "[gpu][buffer][api_error]") {
  const gpucmp::device_info d = gpucmp::query_current_device();
  const std::size_t too_much = 2 * d.global_memory_bytes;
  try {
    gpucmp::device_buffer<unsigned char> b(too_much, gpucmp::initial_fill::uninitialized());
    FAIL("allocating twice the device memory succeeded");
  } catch (const gpucmp::out_of_memory& e) {
    CHECK(e.requested_bytes() == too_much);
    CHECK(e.free_bytes() > 0);
    CHECK(e.free_bytes() <= d.global_memory_bytes);
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("oom: device_buffer of"));
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("free of"));
  }
  // The failure was not sticky: the device still works.
  gpucmp::device_buffer<int> after(16, gpucmp::initial_fill::random(1));
  CHECK(after.to_host().size() == 16);
}

TEST_CASE("a kernel on a non-blocking stream sees all of copy_from_host's data at once", "[gpu][buffer]") {
  // cudaMemcpy from pageable memory may return before its DMA has landed; copy_from_host must
  // not, or a kernel launched right after on another stream reads part of the old contents.
  constexpr std::size_t floats = std::size_t{64} << 20;  // 256 MiB: many DMA chunks
  constexpr int blocks = 1024;                            // partial sums of 65,536 ones: exact in FP32
  gpucmp::device_buffer<float> data(floats, gpucmp::initial_fill::poison());  // NaN until overwritten
  gpucmp::device_buffer<float> partial(blocks, gpucmp::initial_fill::poison());
  gpucmp::stream s;
  data.copy_from_host(std::vector<float>(floats, 1.0f));
  gpucmp_test::launch_read_sum(s.get(), data.data(), floats, partial.data(), blocks);
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  double sum = 0;
  for (float p : partial.to_host()) sum += p;
  CHECK(sum == double(floats));
}
