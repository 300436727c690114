// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Memory operations: every one is verified in full, a corrupted destination is caught, the
// kernels' tuning records its candidates, and bad sizes get typed errors.
#include "catch.hpp"

#include <gpucmp/ops/memory.cuh>
#include <gpucmp/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

TEST_CASE("every memory operation copies every byte", "[gpu][ops][memory]") {
  gpucmp::stream s;
  for (auto op : {gpucmp::memory_op::copy_kernel, gpucmp::memory_op::triad_kernel, gpucmp::memory_op::memcpy_d2d,
                  gpucmp::memory_op::memcpy_h2d, gpucmp::memory_op::memcpy_d2h}) {
    for (std::size_t bytes : {std::size_t{4096 + 16}, std::size_t{64} << 20}) {
      gpucmp::memory_bandwidth m(op, bytes, s.get());
      const gpucmp::verification v = m.verify(s.get());
      INFO(gpucmp::to_string(op) << " " << bytes << ": " << v.summary());
      CHECK(v.passed());
      const gpucmp::work w = m.work();
      const bool over_bus = op == gpucmp::memory_op::memcpy_h2d || op == gpucmp::memory_op::memcpy_d2h;
      CHECK(w.bytes_written == (over_bus ? 0.0 : double(bytes)));
      CHECK(w.bytes_read == double(bytes) * (op == gpucmp::memory_op::triad_kernel ? 2 : 1));
      if (op == gpucmp::memory_op::copy_kernel || op == gpucmp::memory_op::triad_kernel) {
        CHECK(m.candidates().size() == 16);
        CHECK(m.config().threads >= 128);
      }
    }
  }
}

TEST_CASE("a corrupted destination fails verification", "[gpu][ops][memory]") {
  gpucmp::stream s;
  for (auto op : {gpucmp::memory_op::copy_kernel, gpucmp::memory_op::triad_kernel, gpucmp::memory_op::memcpy_h2d}) {
    gpucmp::memory_bandwidth m(op, std::size_t{1} << 20, s.get());
    REQUIRE(m.verify(s.get()).passed());
    const std::uint32_t word = 0x12345678u;
    REQUIRE(cudaMemcpy(static_cast<char*>(m.destination()) + 4096, &word, sizeof word, cudaMemcpyHostToDevice) ==
            cudaSuccess);
    const gpucmp::verification v = m.check_output(s.get());
    CHECK_FALSE(v.passed());
    CHECK(v.failed == 1);
    CHECK(v.worst_where == (op == gpucmp::memory_op::triad_kernel ? "element 512" : "element 1024"));
  }
}

TEST_CASE("bad sizes get typed errors", "[gpu][ops][memory]") {
  CHECK_THROWS_WITH(gpucmp::memory_bandwidth(gpucmp::memory_op::copy_kernel, 10), GPUCMP_CONTAINS("multiple of 16"));
  CHECK_THROWS_AS(gpucmp::memory_bandwidth(gpucmp::memory_op::copy_kernel, std::size_t{1} << 42), gpucmp::out_of_memory);
}
