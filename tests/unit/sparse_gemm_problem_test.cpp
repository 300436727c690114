// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A 2:4 sparse GEMM problem on the host: FLOPs counted dense (as the datasheets' sparse
// figures count them), A's compressed bytes (the kept half and its indices), the precisions
// and GPUs sparse tensor cores take, bad problems named.
#include "catch.hpp"

#include <gpucmp/ops/sparse_gemm_problem.hpp>

TEST_CASE("a sparse GEMM counts dense FLOPs and moves A compressed", "[ops][sparse_gemm]") {
  gpucmp::sparse_gemm_problem p;
  p.m = 8192;
  p.n = 4096;
  p.k = 2048;
  p.dtype = gpucmp::numerics::fp16;
  CHECK(p.flops() == 2.0 * 8192 * 4096 * 2048);
  // Half of A's 16M FP16 values kept (16 MiB), a 2-bit index each (2 MiB).
  CHECK(p.compressed_a_bytes() == 8192.0 * 2048 / 2 * 2 + 8192.0 * 2048 / 2 / 4);
  CHECK(p.min_bytes() == p.compressed_a_bytes() + 4096.0 * 2048 * 2 + 8192.0 * 4096 * 2);
  CHECK(p.footprint_bytes() == p.min_bytes() + 8192.0 * 2048 * 2);
  CHECK(p.shape_name() == "8192x4096x2048");
  CHECK(p.group() == 4);
  // INT8 in, INT32 out; TF32 keeps one of two FP32 values, with a 1-bit index.
  p.dtype = gpucmp::numerics::int8;
  CHECK(p.min_bytes() == 8192.0 * 2048 / 2 * (1 + 0.25) + 4096.0 * 2048 + 8192.0 * 4096 * 4);
  p.dtype = gpucmp::numerics::tf32;
  CHECK(p.group() == 2);
  CHECK(p.compressed_a_bytes() == 8192.0 * 2048 / 2 * (4 + 0.125));
  const std::vector<gpucmp::axis> axes = p.axes();
  REQUIRE(axes.size() == 5);
  CHECK(axes[3].text == "tf32");
  CHECK(axes[4].text == "1:2");
}

TEST_CASE("sparse tensor cores: which precisions and GPUs", "[ops][sparse_gemm]") {
  CHECK(gpucmp::sparse_gemm_support(gpucmp::numerics::fp16, 8, 0).empty());
  CHECK(gpucmp::sparse_gemm_support(gpucmp::numerics::int8, 8, 6).empty());
  CHECK(gpucmp::sparse_gemm_support(gpucmp::numerics::fp8_e4m3, 9, 0).empty());
  CHECK(gpucmp::sparse_gemm_support(gpucmp::numerics::fp8_e4m3, 8, 0).find("needs sm_89+") != std::string::npos);
  CHECK(gpucmp::sparse_gemm_support(gpucmp::numerics::fp16, 7, 5) ==
        "2:4 sparse GEMM needs sparse tensor cores (sm_80+), this GPU is sm_75");
}

TEST_CASE("bad sparse GEMM problems are named", "[ops][sparse_gemm]") {
  gpucmp::sparse_gemm_problem p;
  p.m = 64;
  p.n = 0;
  p.k = 64;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("m, n and k must be positive (got 64x0x64)"));
  p.n = 64;
  p.k = 62;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("k 62 is not a multiple of the sparsity group (4 for fp16)"));
  p.dtype = gpucmp::numerics::tf32;
  CHECK_NOTHROW(p.validate());  // pairs: 62 = 31 x 2
  p.dtype = gpucmp::numerics::fp16_acc16;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("a 2:4 sparse GEMM does not run fp16_acc16"));
  p.dtype = gpucmp::numerics::fp8_e5m2;
  CHECK_THROWS_AS(p.validate(), gpucmp::unsupported);
  p.dtype = gpucmp::numerics::fp16;
  p.m = p.n = p.k = std::int64_t(1) << 40;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("overflow 64-bit indexing"));
}
