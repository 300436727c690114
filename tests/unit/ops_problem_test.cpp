// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/data/resnet50_v1_5.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/gemm_problem.hpp>

#include <set>
#include <tuple>

TEST_CASE("GEMM FLOPs and minimum bytes", "[ops][gemm]") {
  gpucmp::gemm_problem g;
  g.m = g.n = g.k = 8192;
  g.dtype = gpucmp::numerics::bf16;
  CHECK(g.flops() == 2.0 * 8192.0 * 8192.0 * 8192.0);
  CHECK(g.min_bytes() == 3.0 * 8192.0 * 8192.0 * 2);
  CHECK(g.shape_name() == "8192x8192x8192");
  // DeepBench's skinny 35x8457x2560 with A transposed, in FP8: 1-byte inputs, BF16 output.
  gpucmp::gemm_problem f;
  f.m = 35;
  f.n = 8457;
  f.k = 2560;
  f.transpose_a = true;
  f.batch = 2;
  f.dtype = gpucmp::numerics::fp8_e4m3;
  CHECK(f.flops() == 2.0 * 35 * 8457 * 2560 * 2);
  CHECK(f.min_bytes() == 2.0 * (35.0 * 2560 + 2560.0 * 8457 + 35.0 * 8457 * 2));
  CHECK(f.lda_or_tight() == 2560);  // A stored k x m
  CHECK(f.shape_name() == "35x8457x2560_tn_b2");
  CHECK(gpucmp::output_bytes(gpucmp::numerics::int8) == 4);
  CHECK(gpucmp::peak_precision(gpucmp::numerics::fp16_acc16) == gpucmp::precision::fp16);
}

TEST_CASE("impossible GEMMs are named", "[ops][gemm]") {
  gpucmp::gemm_problem g;
  g.m = 128;
  g.n = 0;
  g.k = 64;
  CHECK_THROWS_WITH(g.validate(), GPUCMP_CONTAINS("m, n and k must be positive (got 128x0x64)"));
  g.n = 64;
  g.lda = 100;  // A is 128 x 64: lda must be >= 128
  CHECK_THROWS_WITH(g.validate(), GPUCMP_CONTAINS("lda 100 is less than A's 128 rows"));
  g.lda = 0;
  g.batch = 0;
  CHECK_THROWS_WITH(g.validate(), GPUCMP_CONTAINS("batch must be positive"));
  g.batch = 1;
  CHECK_NOTHROW(g.validate());
}

TEST_CASE("precisions a GPU cannot run are typed unsupported", "[ops][gemm]") {
  CHECK_THROWS_WITH(gpucmp::check_supported(gpucmp::numerics::fp8_e4m3, 8, 0),
                    "unsupported: fp8_e4m3 needs sm_89+, this GPU is sm_80");
  CHECK_THROWS_AS(gpucmp::check_supported(gpucmp::numerics::bf16, 7, 5), gpucmp::unsupported);
  CHECK_NOTHROW(gpucmp::check_supported(gpucmp::numerics::fp8_e5m2, 8, 9));
  CHECK_NOTHROW(gpucmp::check_supported(gpucmp::numerics::fp64, 6, 0));
}

TEST_CASE("the staging plan pads row counts to 16 bytes and names every operand that needs copying", "[ops][gemm]") {
  auto problem = [](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, gpucmp::numerics t) {
    gpucmp::gemm_problem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.transpose_a = ta;
    p.dtype = t;
    return p;
  };
  // DeepBench's FP16 5124x9124x2560 with A transposed: C's 5124 rows (10,248-byte columns)
  // pad M to 5128, so A (K x M stored) gains 4 zero columns; K and N are aligned.
  const auto c_rows = gpucmp::staging_plan(problem(5124, 9124, 2560, true, gpucmp::numerics::fp16));
  CHECK(c_rows.operands() == "A, C");
  CHECK(c_rows.m == 5128);
  CHECK(c_rows.n == 9124);
  CHECK(c_rows.k == 2560);
  CHECK(c_rows.ldc == 5128);
  CHECK(c_rows.lda == 2560);
  CHECK(c_rows.ldb == 2560);
  // In FP32 the same columns are 20,496 bytes: aligned, nothing to stage.
  CHECK_FALSE(gpucmp::staging_plan(problem(5124, 9124, 2560, true, gpucmp::numerics::tf32)).any());
  // 35x8457x2560: A (35 rows) and C; in TF32 padded to 36 rows, in FP16 to 40.
  const auto tf32 = gpucmp::staging_plan(problem(35, 8457, 2560, false, gpucmp::numerics::tf32));
  CHECK(tf32.operands() == "A, C");
  CHECK(tf32.m == 36);
  CHECK(tf32.lda == 36);
  CHECK(tf32.ldc == 36);
  CHECK(gpucmp::staging_plan(problem(35, 8457, 2560, false, gpucmp::numerics::fp16)).lda == 40);
  // FP64 7x9x11: every operand, M and K padded to even counts (N is no matrix's row count).
  const auto fp64 = gpucmp::staging_plan(problem(7, 9, 11, false, gpucmp::numerics::fp64));
  CHECK(fp64.operands() == "A, B, C");
  CHECK(fp64.m == 8);
  CHECK(fp64.n == 9);
  CHECK(fp64.k == 12);
  CHECK(fp64.lda == 8);
  CHECK(fp64.ldb == 12);
  // Aligned leading dimensions but a K of 8190 rows of B: A and B padded, C untouched.
  const auto k_rows = gpucmp::staging_plan(problem(8192, 8192, 8190, false, gpucmp::numerics::fp16));
  CHECK(k_rows.operands() == "A, B");
  CHECK(k_rows.k == 8192);
  CHECK(k_rows.ldc == 8192);
  // B transposed (N x K stored): N is B's row count, so it is padded, and C, which gains the
  // padded N's columns, is staged too; A is untouched.
  auto n_rows = problem(64, 1001, 64, false, gpucmp::numerics::fp16);
  n_rows.transpose_b = true;
  const auto n_plan = gpucmp::staging_plan(n_rows);
  CHECK(n_plan.operands() == "B, C");
  CHECK(n_plan.n == 1008);
  CHECK(n_plan.ldb == 1008);
  // A loose leading dimension that is aligned, with aligned extents, needs nothing; FP8 and
  // INT8 are never staged.
  auto loose = problem(40, 64, 64, false, gpucmp::numerics::fp16);
  loose.lda = loose.ldc = 48;
  CHECK_FALSE(gpucmp::staging_plan(loose).any());
  CHECK_FALSE(gpucmp::staging_plan(problem(8192, 8192, 8192, false, gpucmp::numerics::fp16)).any());
  CHECK_FALSE(gpucmp::staging_plan(problem(35, 8457, 2560, true, gpucmp::numerics::int8)).any());
}

TEST_CASE("convolution output size, FLOPs and bytes", "[ops][conv]") {
  gpucmp::conv_problem c;  // ResNet-50's 64->64 3x3 at 56x56, batch 32, FP16 NHWC
  c.n = 32;
  c.c = c.k = 64;
  c.h = c.w = 56;
  c.r = c.s = 3;
  c.pad_h = c.pad_w = 1;
  CHECK(c.p() == 56);
  CHECK(c.q() == 56);
  CHECK(c.flops() == 2.0 * 32 * 64 * 56 * 56 * 64 * 9);
  CHECK(c.min_bytes(gpucmp::conv_direction::forward) == 2.0 * (32.0 * 64 * 56 * 56 * 2 + 64.0 * 64 * 9));
  CHECK(c.shape_name() == "n32_c64_h56_w56_k64_r3_s3_p1_u1");
  c.stride_h = c.stride_w = 2;
  CHECK(c.p() == 28);
  c.groups = 32;  // depthwise-style grouping divides the work
  CHECK(c.flops() == 2.0 * 32 * 64 * 28 * 28 * 2 * 9);
}

TEST_CASE("impossible convolutions are named", "[ops][conv]") {
  gpucmp::conv_problem c;
  c.n = 1;
  c.c = 3;
  c.h = c.w = 4;
  c.k = 8;
  c.r = c.s = 7;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("the 7x7 filter is larger than the padded 4x4 input"));
  c.r = c.s = 3;
  c.groups = 2;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("groups (2) must divide c (3) and k (8)"));
  c.groups = 1;
  c.stride_h = 0;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("strides must be >= 1"));
}

TEST_CASE("ResNet-50 v1.5's layer table has the exact published totals", "[ops][resnet50]") {
  double conv_macs = 0, conv_params = 0, batchnorm_params = 0;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> distinct;
  int count = 0;
  for (const auto& l : gpucmp::data::resnet50_v1_5_convs) {
    gpucmp::conv_problem c;
    c.n = 1;
    c.c = l.in_channels;
    c.k = l.out_channels;
    c.h = c.w = l.input_size;
    c.r = c.s = l.kernel;
    c.pad_h = c.pad_w = l.padding;
    c.stride_h = c.stride_w = l.stride;
    INFO(l.name);
    REQUIRE_NOTHROW(c.validate());
    CHECK(c.p() == l.output_size);  // the output-size formula reproduces every layer
    conv_macs += c.flops() / 2;
    conv_params += c.w_elements();
    batchnorm_params += 2.0 * double(l.out_channels);  // every convolution is followed by a BN (gamma, beta)
    distinct.insert({l.in_channels, l.out_channels, l.kernel, l.stride, l.input_size});
    ++count;
  }
  const double fc_macs = double(gpucmp::data::resnet50_fc_in) * gpucmp::data::resnet50_fc_out;
  CHECK(count == 53);
  CHECK(conv_macs == 4087136256.0);
  CHECK(conv_macs + fc_macs == 4089184256.0);
  CHECK(conv_params == 23454912.0);
  CHECK(batchnorm_params == 53120.0);
  const double fc_params = fc_macs + double(gpucmp::data::resnet50_fc_out);  // weights + bias
  CHECK(conv_params + batchnorm_params + fc_params == 25557032.0);  // torchvision's num_params
  CHECK(distinct.size() == 23);
}
