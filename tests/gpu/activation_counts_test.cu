// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Calibration's counting on the GPU (models/activation_counts.cuh) gives the host's ranges
// (models/calibration.hpp) on the same values, whatever the batch split, in FP32 and FP16, and
// refuses a broken value as the host does; a whole calibration (models/calibration_run.cuh)
// gives, tensor by tensor, the ranges of the same network's activations counted on the host.
#include "catch.hpp"
#include "small_cnn.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/activation_counts.cuh>
#include <gpucmp/models/calibration_run.cuh>

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
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

TEST_CASE("a calibration gives each stored tensor the range of its activations counted on the host", "[gpu][models][calibration]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = gpucmp_test::small_cnn();
  gpucmp::calibration_settings settings;
  settings.images = 40;  // batches of 16, 16 and 8
  settings.percentile = 99.9;
  settings.seed = 3;
  const gpucmp::calibration_table table = gpucmp::calibrate(def, settings, 16, s.get());
  CHECK(table.model == "small_cnn");
  CHECK(table.weights == gpucmp::definition_fingerprint(def));
  // The host's count: the same FP32 network, the same images, each tensor's values copied out.
  gpucmp::network_options options;
  options.batch = 16;
  options.dtype = gpucmp::numerics::fp32;
  options.layout = gpucmp::conv_layout::nchw;
  gpucmp::network net(def, options, s.get());
  const gpucmp::calibration_images images = gpucmp::random_calibration_images(def.shape(def.input()), settings.seed);
  std::map<std::string, gpucmp::activation_range> host;
  for (std::int64_t first = 0; first < settings.images; first += 16) {
    const std::int64_t valid = std::min<std::int64_t>(16, settings.images - first);
    std::vector<float> batch = images(first, valid);
    host["input"].add(batch.data(), batch.size(), "input");
    batch.resize(std::size_t(16 * def.shape(def.input()).elements()), 0.0f);
    net.set_input(batch, s.get());
    for (std::size_t i = 0; i < def.layers().size(); ++i) {
      net.run_layer(i, s.get());
      const gpucmp::layer_definition& l = def.layers()[i];
      if (!table.ranges.count(l.name)) continue;
      const std::vector<float> values = net.activation_values(l.output, s.get());
      host[l.name].add(values.data(), std::size_t(valid * def.shape(l.output).elements()), l.name);
    }
  }
  REQUIRE(table.ranges.size() == gpucmp::calibration_tensors(def).size());
  for (const auto& [name, range] : table.ranges) {
    INFO(name);
    CHECK(range > 0);
    CHECK(range == host.at(name).range(settings));
  }
  CHECK(table.ranges.at("input") <= 2.0);
}

TEST_CASE("a calibration on broken images names the first tensor they broke", "[gpu][models][calibration]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = gpucmp_test::small_cnn();
  gpucmp::calibration_settings settings;
  settings.images = 8;
  const gpucmp::calibration_images broken = [&](std::int64_t, std::int64_t count) {
    std::vector<float> v(std::size_t(count * def.shape(def.input()).elements()), 0.5f);
    v[7] = NAN;
    return v;
  };
  CHECK_THROWS_WITH(gpucmp::calibrate(def, settings, 8, s.get(), broken),
                    GPUCMP_CONTAINS("calibration of input: 1 values are not finite"));
  settings.images = 0;
  CHECK_THROWS_WITH(gpucmp::calibrate(def, settings, 8, s.get()),
                    GPUCMP_CONTAINS("small_cnn: a calibration needs at least one image"));
}
