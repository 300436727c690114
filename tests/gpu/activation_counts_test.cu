// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Calibration's counting on the GPU (models/activation_counts.cuh) gives the host's ranges
// (models/calibration.hpp) on the same values, whatever the batch split, in FP32 and FP16, and
// refuses a broken value as the host does.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/activation_counts.cuh>

#include <cuda_fp16.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

// Magnitudes spread over 2^-70 .. 2^40 (the lowest under the first bin: zeros), both signs,
// exact zeros among them.
std::vector<float> spread_values(std::size_t n) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> exponent(-70, 40);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = i % 97 == 0 ? 0.0f : float((i % 2 ? -1 : 1) * std::exp2(exponent(rng)));
  }
  return v;
}

}  // namespace

TEST_CASE("counts made on the GPU give the host's range, whatever the batch split", "[gpu][models][calibration]") {
  gpucmp::stream s;
  const std::vector<float> v = spread_values(1 << 20);
  gpucmp::device_buffer<float> d(v.size(), gpucmp::initial_fill::uninitialized());
  d.copy_from_host(v);
  gpucmp::activation_range host;
  host.add(v.data(), v.size(), "t");
  gpucmp::activation_counter counter(s.get());
  counter.add(d.data(), 300001, s.get());  // two batches of uneven size
  counter.add(d.data() + 300001, v.size() - 300001, s.get());
  const gpucmp::activation_range gpu = counter.range("t", s.get());
  CHECK(gpu.count() == host.count());
  CHECK(gpu.max_abs() == host.max_abs());
  for (double p : {1.0, 50.0, 99.0, 99.9, 99.99, 100.0}) CHECK(gpu.percentile_abs(p) == host.percentile_abs(p));

  // FP16 values: the same counts as the host's of their FP32 values.
  std::vector<__half> h(4096);
  std::vector<float> h_as_float(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    h[i] = __float2half(float(std::ldexp(double(i % 1000) - 500, -int(i % 20))));
    h_as_float[i] = __half2float(h[i]);
  }
  gpucmp::device_buffer<__half> dh(h.size(), gpucmp::initial_fill::uninitialized());
  dh.copy_from_host(h);
  counter.reset(s.get());
  counter.add(dh.data(), dh.size(), s.get());
  gpucmp::activation_range host_half;
  host_half.add(h_as_float.data(), h_as_float.size(), "h");
  const gpucmp::activation_range gpu_half = counter.range("h", s.get());
  CHECK(gpu_half.count() == host_half.count());
  CHECK(gpu_half.max_abs() == host_half.max_abs());
  CHECK(gpu_half.percentile_abs(99.0) == host_half.percentile_abs(99.0));
}

TEST_CASE("a value that is not finite is refused by name on the GPU too", "[gpu][models][calibration]") {
  gpucmp::stream s;
  std::vector<float> v(1000, 1.5f);
  v[123] = NAN;
  v[456] = INFINITY;
  gpucmp::device_buffer<float> d(v.size(), gpucmp::initial_fill::uninitialized());
  d.copy_from_host(v);
  gpucmp::activation_counter counter(s.get());
  counter.add(d.data(), d.size(), s.get());
  CHECK_THROWS_WITH(counter.range("layer3.1.conv2.input", s.get()),
                    GPUCMP_CONTAINS("calibration of layer3.1.conv2.input: 2 values are not finite or are past 2^64"));
}
