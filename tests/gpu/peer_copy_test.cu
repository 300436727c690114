// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Copies between GPUs (multigpu/peer_copy.cuh): with two or more GPUs every ordered pair
// copies and verifies through both methods, one way and both ways, and the engine times it;
// with one GPU a peer copy is refused as "one GPU".
#include "catch.hpp"

#include <gpucmp/measure/engine.hpp>
#include <gpucmp/multigpu/peer_copy.cuh>

#include <string>

TEST_CASE("peer copies verify between every pair of GPUs, or say there is one GPU", "[gpu][multigpu][p2p]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  gpucmp::engine eng;
  if (count < 2) {
    CHECK_THROWS_WITH(gpucmp::peer_copy(0, 0, 1 << 20, gpucmp::peer_method::memcpy_peer), GPUCMP_CONTAINS("one GPU"));
    CHECK_FALSE(gpucmp::query_peer_access(0, 0).possible);
    return;
  }
  for (int a = 0; a < count; ++a)
    for (int b = 0; b < count; ++b) {
      if (a == b) continue;
      for (gpucmp::peer_method m : {gpucmp::peer_method::memcpy_peer, gpucmp::peer_method::copy_kernel})
        for (bool both : {false, true}) {
          if (m == gpucmp::peer_method::copy_kernel && !gpucmp::query_peer_access(a, b).possible) {
            WARN(gpucmp::query_peer_access(a, b).reason);
            continue;
          }
          gpucmp::peer_copy copy(a, b, std::size_t{64} << 20, m, both);
          INFO(copy.name());
          const gpucmp::verification v = copy.verify(eng.stream());
          INFO(v.summary());
          CHECK(v.passed());
          const gpucmp::measurement r = eng.measure(copy, gpucmp::mode::hot);
          CHECK(r.ok());
          CHECK(copy.work().bytes_read / r.gpu.median > 1e9);  // more than 1 GB/s over any link
        }
    }
}

TEST_CASE("a peer copy's size must be a positive multiple of 16", "[gpu][multigpu][p2p][api_error]") {
  CHECK_THROWS_WITH(gpucmp::peer_copy(0, 1, 10, gpucmp::peer_method::memcpy_peer), GPUCMP_CONTAINS("multiple of 16"));
  CHECK_THROWS_AS(gpucmp::peer_copy(0, 1, 0, gpucmp::peer_method::memcpy_peer), gpucmp::invalid_argument);
}
