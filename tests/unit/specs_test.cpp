// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/specs/roofline.hpp>
#include <gpucmp/specs/specs.hpp>
#include <gpucmp/specs/work.hpp>

#include <cmath>
#include <string>
#include <utility>

TEST_CASE("every device-name string resolves to its row", "[specs]") {
  // The strings drivers report (shared/data/gpu-specs.md), and the variants that must not
  // be confused with them.
  const std::pair<const char*, const char*> names[] = {
      {"NVIDIA A100-SXM4-80GB", "a100_80gb_sxm"},
      {"NVIDIA A100 80GB PCIe", "a100_80gb_pcie"},
      {"NVIDIA A100-PCIE-40GB", "a100_40gb_pcie"},
      {"NVIDIA A100-SXM4-40GB", "a100_40gb_sxm"},
      {"NVIDIA H100 80GB HBM3", "h100_sxm"},
      {"NVIDIA H100 PCIe", "h100_pcie"},
      {"NVIDIA H100 80GB HBM2e", "h100_pcie"},
      {"NVIDIA H200", "h200_sxm"},
      {"NVIDIA H200 NVL", "h200_nvl"},
      {"NVIDIA H200 PCIe", "h200_nvl"},
      {"NVIDIA B200", "b200"},
      {"NVIDIA L40S", "l40s"},
      {"NVIDIA L40", "l40"},
      {"NVIDIA L4", "l4"},
      {"NVIDIA L20", "l20"},
      {"NVIDIA A10", "a10"},
      {"Tesla T4", "t4"},
      {"Tesla V100-SXM2-32GB", "v100_sxm2_32gb"},
      {"NVIDIA GeForce RTX 4090", "rtx_4090"},
      {"NVIDIA_GeForce_RTX_4090", "rtx_4090"},
  };
  for (const auto& [name, key] : names) {
    INFO(name);
    const auto found = gpucmp::find_spec_by_device_name(name);
    REQUIRE(found.has_value());
    CHECK(found->key == key);
    CHECK(found->matched == gpucmp::spec_match::by_name);
  }
  CHECK_FALSE(gpucmp::find_spec_by_device_name("NVIDIA A40").has_value());
  CHECK_FALSE(gpucmp::find_spec_by_device_name("").has_value());
}

TEST_CASE("dense peaks are consistent in every row", "[specs]") {
  for (const auto& g : gpucmp::all_gpu_specs()) {
    INFO(g.key);
    const double tf32 = g.peak_tflops[size_t(gpucmp::precision::tf32)];
    const double fp16 = g.peak_tflops[size_t(gpucmp::precision::fp16)];
    const double bf16 = g.peak_tflops[size_t(gpucmp::precision::bf16)];
    const double fp8 = g.peak_tflops[size_t(gpucmp::precision::fp8)];
    if (std::isfinite(tf32) && std::isfinite(fp16)) CHECK(fp16 >= tf32);
    if (std::isfinite(fp16) && std::isfinite(bf16)) CHECK(bf16 == fp16);
    if (std::isfinite(fp8) && std::isfinite(fp16)) CHECK(fp8 >= fp16);
    // Dense, not sparse: no GPU of this generation exceeds 2.5 PFLOP/s dense BF16.
    if (std::isfinite(bf16)) CHECK(bf16 <= 2500);
    CHECK(g.memory_bandwidth_gbs > 0);
    CHECK(g.memory_gb > 0);
    CHECK_FALSE(g.sources.empty());
  }
}

TEST_CASE("figures the articles got wrong are right in the database", "[specs]") {
  const auto l20 = gpucmp::find_spec_by_key("l20");
  REQUIRE(l20.has_value());
  CHECK(l20->architecture.find("Ada") == 0);
  CHECK(l20->memory_gb == 48);
  CHECK(l20->memory_bandwidth_gbs == 864);
  CHECK(l20->tdp_w == 275);
  CHECK(l20->trust == gpucmp::confidence::low);
  const auto l40s = gpucmp::find_spec_by_key("l40s");
  CHECK(l40s->tdp_w == 350);
  CHECK(l40s->peak_tflops[size_t(gpucmp::precision::tf32)] == 183);
  CHECK_FALSE(gpucmp::find_spec_by_key("a100_80gb_sxm")->supports(gpucmp::precision::fp8));
  CHECK(gpucmp::errata_for("l20").size() >= 9);
}

TEST_CASE("unknown names fall back to compute capability and memory, then to derived figures", "[specs]") {
  gpucmp::device_facts a800;  // not in the database by name (an A100 variant)
  a800.name = "NVIDIA A800-SXM4-40GB";
  a800.cc_major = 8;
  a800.cc_minor = 0;
  a800.memory_bytes = 42.3e9;  // the driver reports 40 GiB
  const auto by_cc = gpucmp::spec_for_device(a800);
  CHECK(by_cc.key == "a100_40gb_pcie");  // of the two 40 GB rows, the first
  CHECK(by_cc.matched == gpucmp::spec_match::by_compute_capability);

  gpucmp::device_facts unknown;
  unknown.name = "NVIDIA Future GPU";
  unknown.cc_major = 12;
  unknown.cc_minor = 0;
  unknown.memory_bytes = 96e9;
  unknown.sm_count = 100;
  unknown.sm_clock_max_hz = 2e9;
  unknown.memory_bandwidth_bytes_per_s = 2e12;
  unknown.l2_bytes = 64.0 * 1024 * 1024;
  const auto derived = gpucmp::spec_for_device(unknown);
  CHECK(derived.trust == gpucmp::confidence::derived);
  CHECK(derived.matched == gpucmp::spec_match::derived);
  CHECK(derived.key == "derived:NVIDIA Future GPU");
  CHECK(derived.peak_tflops[size_t(gpucmp::precision::fp32)] == Approx(100 * 128 * 2 * 2e9 * 1e-12));
  CHECK(derived.memory_bandwidth_gbs == Approx(2000));
  CHECK(derived.l2_mb == Approx(64));
  CHECK_FALSE(derived.supports(gpucmp::precision::bf16));
}

TEST_CASE("precision names round-trip and benchmark dtypes map to their rate", "[specs]") {
  for (std::size_t i = 0; i < gpucmp::precision_count; ++i) {
    const auto p = static_cast<gpucmp::precision>(i);
    CHECK(gpucmp::precision_from_name(gpucmp::to_string(p)) == p);
  }
  CHECK(gpucmp::precision_from_name("fp8_e4m3") == gpucmp::precision::fp8);
  CHECK(gpucmp::precision_from_name("fp16_acc16") == gpucmp::precision::fp16);
  CHECK(gpucmp::precision_from_name("8192x8192x8192") == gpucmp::precision::none);
}

TEST_CASE("2:4 sparsity doubles the tensor-core peaks of Ampere and later, and only those", "[specs]") {
  const auto h200 = gpucmp::find_spec_by_key("h200_sxm");
  REQUIRE(h200.has_value());
  using gpucmp::precision;
  using gpucmp::sparsity;
  for (precision p : {precision::tf32, precision::fp16, precision::bf16, precision::fp8, precision::int8}) {
    INFO(gpucmp::to_string(p));
    CHECK(h200->peak_per_s(p, sparsity::structured_2_4) == 2 * h200->peak_per_s(p));
    CHECK(h200->peak_per_s(p, sparsity::dense) == h200->peak_per_s(p));
  }
  // No datasheet gives a sparse FP64 or CUDA-core FP32 rate.
  CHECK_FALSE(h200->supports(precision::fp64_tensor, sparsity::structured_2_4));
  CHECK_FALSE(h200->supports(precision::fp32, sparsity::structured_2_4));
  // % of peak of a 2:4 GEMM at the dense rate's speed is half.
  gpucmp::work w;
  w.flops = 1e12;
  w.arithmetic = precision::fp16;
  const double seconds = w.flops / h200->peak_per_s(precision::fp16);
  CHECK(gpucmp::place_on_roofline(w, seconds, *h200).fraction_of_peak_compute == Approx(1.0));
  w.structure = sparsity::structured_2_4;
  CHECK(gpucmp::place_on_roofline(w, seconds, *h200).fraction_of_peak_compute == Approx(0.5));
}
