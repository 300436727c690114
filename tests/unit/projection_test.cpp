// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

#include <gpucmp/specs/projection.hpp>
#include <gpucmp/specs/roofline.hpp>

#include <string>

namespace {
gpucmp::gpu_profile gpu(const char* key) { return *gpucmp::find_spec_by_key(key); }

gpucmp::work gemm_bf16(double n) {
  gpucmp::work w;
  w.flops = 2 * n * n * n;
  w.bytes_read = 2 * n * n * 2;
  w.bytes_written = n * n * 2;
  w.arithmetic = gpucmp::precision::bf16;
  return w;
}
}  // namespace

TEST_CASE("a large GEMM is compute-bound and its % of peak is achieved over dense peak", "[projection]") {
  const auto w = gemm_bf16(8192);
  // 796 TFLOP/s on an H200: 80.4 % of 989.5.
  const double seconds = w.flops / 796e12;
  const auto r = gpucmp::place_on_roofline(w, seconds, gpu("h200_sxm"));
  CHECK(r.bound == gpucmp::roofline_bound::compute);
  CHECK(r.fraction_of_peak_compute == Approx(796.0 / 989.5));
  CHECK(r.arithmetic_intensity == Approx(w.flops / w.bytes()));
  CHECK(r.ridge_intensity == Approx(989.5e12 / 4800e9));
  CHECK_FALSE(r.fits_in_l2);
}

TEST_CASE("a copy is memory-bound, and a small one fits in L2", "[projection]") {
  gpucmp::work copy;
  copy.bytes_read = copy.bytes_written = 4.0 * (1 << 30);
  const auto big = gpucmp::place_on_roofline(copy, 2 * 4.0 * (1 << 30) / 4.3e12, gpu("h200_sxm"));
  CHECK(big.bound == gpucmp::roofline_bound::memory);
  CHECK(big.fraction_of_peak_bandwidth == Approx(4.3 / 4.8));
  CHECK(std::isnan(big.fraction_of_peak_compute));
  copy.bytes_read = copy.bytes_written = 8.0 * (1 << 20);
  CHECK(gpucmp::place_on_roofline(copy, 1e-6, gpu("h200_sxm")).fits_in_l2);
}

TEST_CASE("projection carries the measured efficiency of the binding ceiling", "[projection]") {
  const auto w = gemm_bf16(8192);
  const double measured = w.flops / 796e12;  // 80.4 % of the H200's peak
  // Compute-bound on the A100 too: 312 x 0.804 = 251 TFLOP/s.
  const auto a100 = gpucmp::project(w, measured, gpu("h200_sxm"), gpu("a100_80gb_sxm"));
  REQUIRE(a100.status == gpucmp::projection_status::projected);
  CHECK(a100.used.compute == Approx(796.0 / 989.5));
  CHECK(w.flops / a100.seconds == Approx(312e12 * 796.0 / 989.5));
  CHECK(a100.seconds == Approx(a100.compute_s));
  // Same Hopper peak on the H100 SXM: the same time.
  CHECK(gpucmp::project(w, measured, gpu("h200_sxm"), gpu("h100_sxm")).seconds == Approx(measured));
}

TEST_CASE("a memory-bound result projects with the bandwidth ratio", "[projection]") {
  gpucmp::work copy;
  copy.bytes_read = copy.bytes_written = 2e9;
  const double measured = 4e9 / 4.2e12;  // 87.5 % of 4.8 TB/s
  const auto l40s = gpucmp::project(copy, measured, gpu("h200_sxm"), gpu("l40s"));
  REQUIRE(l40s.status == gpucmp::projection_status::projected);
  CHECK(l40s.used.memory == Approx(4.2 / 4.8));
  CHECK(l40s.seconds == Approx(measured * 4800.0 / 864.0));
}

TEST_CASE("the ceiling that did not bind uses the other efficiency", "[projection]") {
  // 300 FLOP/byte: compute-bound on an H200 (ridge 206), memory-bound on an L40S (ridge 419,
  // 372 with these efficiencies). The memory side then uses the supplied bandwidth efficiency.
  gpucmp::work w;
  w.flops = 300e9;
  w.bytes_read = 1e9;
  w.arithmetic = gpucmp::precision::bf16;
  const double measured = w.flops / (0.8 * 989.5e12);
  gpucmp::efficiency elsewhere;
  elsewhere.memory = 0.9;
  const auto l40s = gpucmp::project(w, measured, gpu("h200_sxm"), gpu("l40s"), elsewhere);
  REQUIRE(l40s.status == gpucmp::projection_status::projected);
  CHECK(l40s.used.compute == Approx(0.8));
  CHECK(l40s.compute_s == Approx(w.flops / (362.05e12 * 0.8)));
  CHECK(l40s.memory_s == Approx(1e9 / (864e9 * 0.9)));
  CHECK(l40s.seconds == Approx(l40s.memory_s));
}

TEST_CASE("projections say when they cannot be made", "[projection]") {
  gpucmp::work fp8;
  fp8.flops = 1e12;
  fp8.bytes_read = 1e6;
  fp8.arithmetic = gpucmp::precision::fp8;
  const auto a100 = gpucmp::project(fp8, 1e-3, gpu("h200_sxm"), gpu("a100_80gb_sxm"));
  CHECK(a100.status == gpucmp::projection_status::unsupported);
  CHECK(a100.reason == "fp8 has no peak on NVIDIA A100 80GB SXM4");

  gpucmp::work huge;
  huge.bytes_read = 100e9;  // more than an L20's 48 GB
  CHECK(gpucmp::project(huge, 1.0, gpu("h200_sxm"), gpu("l20")).status == gpucmp::projection_status::oom);

  CHECK(gpucmp::project(gpucmp::work{}, 1.0, gpu("h200_sxm"), gpu("l20")).status == gpucmp::projection_status::no_model);
}

TEST_CASE("a result measured within reach of the launch latency is not projected", "[projection]") {
  // A 65536-element saxpy: 786 KB moved in 4 us on an H200 (L2-resident, launch-bound).
  gpucmp::work saxpy;
  saxpy.flops = 2.0 * 65536;
  saxpy.bytes_read = 2.0 * 65536 * 4;
  saxpy.bytes_written = 65536.0 * 4;
  saxpy.arithmetic = gpucmp::precision::fp32;
  const auto fast = gpucmp::project(saxpy, 4e-6, gpu("h200_sxm"), gpu("a100_80gb_sxm"));
  CHECK(fast.status == gpucmp::projection_status::latency_bound);
  CHECK_THAT(fast.reason, GPUCMP_CONTAINS("4 us a launch: launch latency"));
  CHECK(std::string(gpucmp::to_string(fast.status)) == "latency-bound");
  // From the threshold on, the roofline applies, and an A100 (less bandwidth) is no faster.
  gpucmp::work large = saxpy;
  large.bytes_read *= 1024;
  large.bytes_written *= 1024;
  large.flops *= 1024;
  const double measured = 70e-6;
  const auto a100 = gpucmp::project(large, measured, gpu("h200_sxm"), gpu("a100_80gb_sxm"));
  REQUIRE(a100.status == gpucmp::projection_status::projected);
  CHECK(a100.seconds > measured);
  CHECK_FALSE(a100.from_l2_resident);  // 805 MB: DRAM-bound on the H200
  // 8 MB in 20 us fits the H200's L2: projected with DRAM bandwidth, and the result says so.
  gpucmp::work cached = saxpy;
  cached.bytes_read *= 8;
  cached.bytes_written *= 8;
  cached.flops *= 8;
  const auto l2 = gpucmp::project(cached, 20e-6, gpu("h200_sxm"), gpu("a100_80gb_sxm"));
  REQUIRE(l2.status == gpucmp::projection_status::projected);
  CHECK(l2.from_l2_resident);
}
