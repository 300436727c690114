// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The Google Benchmark adapter's output that needs no GPU: the kernel-breakdown companion
// file (--gpucmp_kernels_out), read back with gpucmp's JSON reader.
#include "catch.hpp"

#include <gpucmp/detail/json.hpp>
#include <gpucmp/gbench.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

TEST_CASE("kernel breakdowns are written as valid JSON with names escaped", "[gbench]") {
  gpucmp::kernel_stat gemm;
  gemm.name = "void gemm<\"quoted\", \\slash>(float*)";
  gemm.kind = gpucmp::activity_kind::kernel;
  gemm.count = 10;
  gemm.per_launch = 1;
  gemm.total_s = 1e-2;
  gemm.median_s = 1e-3;
  gemm.share = 0.75;
  gpucmp::kernel_stat memset = gemm;
  memset.name = "[memset]";
  memset.kind = gpucmp::activity_kind::memset;
  memset.share = 0.25;
  auto& list = gpucmp::detail::kernel_breakdowns();
  list.clear();
  list.push_back({"model/resnet50/kernel", {gemm, memset}});

  const std::string path = "gbench_output_test_kernels.json";
  REQUIRE(gpucmp::detail::write_kernel_breakdowns(path));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  const gpucmp::detail::json root = gpucmp::detail::parse_json(text.str());
  REQUIRE(root.find("breakdowns") != nullptr);
  const auto& breakdowns = root.find("breakdowns")->items();
  REQUIRE(breakdowns.size() == 1);
  CHECK(breakdowns[0].find("benchmark")->string() == "model/resnet50/kernel");
  const auto& kernels = breakdowns[0].find("kernels")->items();
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].find("name")->string() == gemm.name);
  CHECK(kernels[0].find("count")->number() == 10);
  CHECK(kernels[0].find("share")->number() == Approx(0.75));
  CHECK(kernels[1].find("kind")->string() == "memset");
  list.clear();
}

TEST_CASE("an unwritable breakdown path is reported, not ignored", "[gbench]") {
  CHECK_FALSE(gpucmp::detail::write_kernel_breakdowns("/nonexistent-dir/kernels.json"));
}
