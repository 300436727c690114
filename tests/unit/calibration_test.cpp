// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// Calibration on the host: the logarithmic bins, max-abs and percentile ranges (an outlier
// clipped), the same result whatever the order, batch split or merge of the values, broken
// FP32 values refused without touching the counts, the formats' scales, per-channel weight
// ranges, the weights' fingerprint, and the calibration file: written and read back, and each
// way it can be wrong named (missing, malformed, another format, model or weights, a tensor
// missing or unknown, a bad range); counts made elsewhere (the GPU's) handed over.
#include "catch.hpp"

#include <gpucmp/models/calibration.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> sample_values() {  // 9,999 values in (-1, 1) and one outlier of 1000
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(9999);
  for (float& x : v) x = u(rng);
  v.push_back(1000.0f);
  return v;
}

}  // namespace

TEST_CASE("calibration bins are 64 a power of two", "[models][calibration]") {
  using r = gpucmp::activation_range;
  CHECK(r::bin_of(1.0) == 64 * 64);
  CHECK(r::upper_edge(r::bin_of(1.0)) == Approx(std::exp2(1.0 / 64)));
  CHECK(r::bin_of(2.0) == 65 * 64);
  CHECK(r::bin_of(std::exp2(-70)) == -1);  // counts as a zero
  CHECK(r::bin_of(1e300) == r::bin_count - 1);
}

TEST_CASE("max-abs and percentile ranges; an outlier is clipped by the percentile", "[models][calibration]") {
  const std::vector<float> v = sample_values();
  gpucmp::activation_range a;
  a.add(v.data(), v.size(), "t");
  CHECK(a.count() == 10000);
  CHECK(a.max_abs() == 1000.0);
  const double p = a.percentile_abs(99.99);  // 9,999 of 10,000 values are under 1
  CHECK(p <= std::exp2(1.0 / 64));
  CHECK(p > 0.99);
  CHECK(a.percentile_abs(100) == 1000.0);
  gpucmp::calibration_settings s;
  s.method = gpucmp::calibration_method::max_abs;
  CHECK(a.range(s) == 1000.0);
  s.method = gpucmp::calibration_method::percentile;
  CHECK(a.range(s) == p);
  CHECK_THROWS_WITH(a.percentile_abs(0), GPUCMP_CONTAINS("a percentile must be in (0, 100]"));
  gpucmp::activation_range zeros;
  const std::vector<float> z(100, 0.0f);
  zeros.add(z.data(), z.size(), "z");
  CHECK(zeros.percentile_abs(99.99) == 0);
  CHECK(gpucmp::quantization_scale(0, 448) == 1);  // an all-zero tensor
}

TEST_CASE("a calibration does not depend on the values' order, batch split or merge", "[models][calibration]") {
  std::vector<float> v = sample_values();
  gpucmp::activation_range whole;
  whole.add(v.data(), v.size(), "t");
  std::shuffle(v.begin(), v.end(), std::mt19937(9));
  gpucmp::activation_range first, second;
  first.add(v.data(), 3333, "t");
  second.add(v.data() + 3333, v.size() - 3333, "t");
  first.merge(second);
  CHECK(first.count() == whole.count());
  CHECK(first.max_abs() == whole.max_abs());
  for (double p : {50.0, 99.0, 99.9, 99.99, 100.0}) CHECK(first.percentile_abs(p) == whole.percentile_abs(p));
}

TEST_CASE("a broken FP32 value is refused and the counts stay as they were", "[models][calibration]") {
  gpucmp::activation_range a;
  const std::vector<float> good{1, 2, 3};
  a.add(good.data(), good.size(), "layer1.0.conv1.input");
  const std::vector<float> bad{4, NAN, 5};
  CHECK_THROWS_WITH(a.add(bad.data(), bad.size(), "layer1.0.conv1.input"),
                    GPUCMP_CONTAINS("calibration of layer1.0.conv1.input: value nan at 1 is not finite"));
  CHECK(a.count() == 3);
  CHECK(a.max_abs() == 3);
}

TEST_CASE("counts made elsewhere in the same bins give the same range; wrong counts are refused", "[models][calibration]") {
  const std::vector<float> v = sample_values();
  gpucmp::activation_range direct;
  direct.add(v.data(), v.size(), "t");
  // The counts as the GPU hands them over: one per bin, the zeros, the largest |x|.
  std::vector<std::uint64_t> bins(std::size_t(gpucmp::activation_range::bin_count), 0);
  std::uint64_t zeros = 0;
  double largest = 0;
  for (float x : v) {
    const double a = std::fabs(double(x));
    largest = std::max(largest, a);
    const int b = a > 0 ? gpucmp::activation_range::bin_of(a) : -1;
    if (b < 0) {
      ++zeros;
    } else {
      ++bins[std::size_t(b)];
    }
  }
  gpucmp::activation_range handed;
  handed.add_counts(bins, zeros, largest, "t");
  CHECK(handed.count() == direct.count());
  CHECK(handed.max_abs() == direct.max_abs());
  for (double p : {50.0, 99.0, 99.99, 100.0}) CHECK(handed.percentile_abs(p) == direct.percentile_abs(p));
  CHECK_THROWS_WITH(handed.add_counts(std::vector<std::uint64_t>(10, 1), 0, 1.0, "layer2.0.conv1.input"),
                    GPUCMP_CONTAINS("calibration of layer2.0.conv1.input: 10 bins, expected 8192"));
  CHECK_THROWS_WITH(handed.add_counts(bins, 0, INFINITY, "t"), GPUCMP_CONTAINS("largest |x| inf is not finite"));
  CHECK(handed.count() == direct.count());  // the refused counts were not added
}

TEST_CASE("scales, per-channel weight ranges and the weights' fingerprint", "[models][calibration]") {
  CHECK(gpucmp::quantization_scale(448, 448) == 1);
  CHECK(gpucmp::quantization_scale(2.54, 127) == Approx(0.02));
  const std::vector<float> w{0.5f, -2.0f, 1.0f, 0.25f, -0.125f, 0.0f};
  CHECK(gpucmp::per_channel_amax(w, 2, 3) == std::vector<double>{2.0, 0.25});
  CHECK_THROWS_WITH(gpucmp::per_channel_amax(w, 4, 2), GPUCMP_CONTAINS("6 weights are not 4 channels of 2"));
  const std::string a = gpucmp::weights_fingerprint({w, {1.0f}});
  CHECK(a.size() == 16);
  CHECK(a == gpucmp::weights_fingerprint({w, {1.0f}}));
  std::vector<float> changed = w;
  changed[4] = -0.126f;
  CHECK(a != gpucmp::weights_fingerprint({changed, {1.0f}}));
}

TEST_CASE("a calibration file is written, read back, and every way it can be wrong is named", "[models][calibration]") {
  gpucmp::calibration_table t;
  t.model = "resnet50_v1_5";
  t.weights = "0123456789abcdef";
  t.settings.images = 512;
  t.ranges = {{"conv1.input", 2.64}, {"fc.input", 7.125}, {"layer4.2.relu", 0.0}};
  const std::vector<std::string> tensors{"conv1.input", "fc.input", "layer4.2.relu"};
  const std::string text = gpucmp::calibration_json(t);
  const gpucmp::calibration_table back = gpucmp::parse_calibration(text, "cal.json", t.model, t.weights, tensors);
  CHECK(back.ranges == t.ranges);
  CHECK(back.settings.method == gpucmp::calibration_method::percentile);
  CHECK(back.settings.percentile == 99.99);
  CHECK(back.settings.images == 512);
  // Through a file.
  const char* base = std::getenv("TMPDIR");
  const std::string path = std::string(base != nullptr ? base : "/tmp") + "/gpucmp-calibration-test.json";
  gpucmp::write_calibration(path, t);
  CHECK(gpucmp::read_calibration(path, t.model, t.weights, tensors).ranges == t.ranges);
  std::remove(path.c_str());
  CHECK_THROWS_WITH(gpucmp::read_calibration(path, t.model, t.weights, tensors), GPUCMP_CONTAINS("cannot open the calibration file"));
  auto read = [&](const std::string& s) { return gpucmp::parse_calibration(s, "cal.json", t.model, t.weights, tensors); };
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    const std::size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  CHECK_THROWS_WITH(read(text.substr(0, text.size() / 2)), GPUCMP_CONTAINS("cal.json: malformed calibration file: line"));
  CHECK_THROWS_WITH(read(edited("gpucmp-calibration", "trt-cache")), GPUCMP_CONTAINS("not a gpucmp calibration file"));
  CHECK_THROWS_WITH(read(edited("\"version\": 1", "\"version\": 2")), GPUCMP_CONTAINS("this gpucmp reads version 1"));
  CHECK_THROWS_WITH(gpucmp::parse_calibration(text, "cal.json", "resnet18", t.weights, tensors),
                    GPUCMP_CONTAINS("calibrated for model 'resnet50_v1_5', not 'resnet18'"));
  CHECK_THROWS_WITH(gpucmp::parse_calibration(text, "cal.json", t.model, "fedcba9876543210", tensors),
                    GPUCMP_CONTAINS("calibrated for other weights (fingerprint 0123456789abcdef, these weights are fedcba9876543210)"));
  CHECK_THROWS_WITH(gpucmp::parse_calibration(text, "cal.json", t.model, t.weights, {"conv1.input", "fc.input", "layer4.2.relu", "extra"}),
                    GPUCMP_CONTAINS("tensor 'extra' has no range"));
  CHECK_THROWS_WITH(gpucmp::parse_calibration(text, "cal.json", t.model, t.weights, {"conv1.input", "fc.input"}),
                    GPUCMP_CONTAINS("tensor 'layer4.2.relu' is not one of resnet50_v1_5's"));
  CHECK_THROWS_WITH(read(edited("7.125", "-7.125")), GPUCMP_CONTAINS("tensor 'fc.input': its range must be a finite number >= 0"));
  CHECK_THROWS_WITH(read(edited("\"percentile\",", "\"entropy\",")), GPUCMP_CONTAINS("method 'entropy' is neither max_abs nor percentile"));
  CHECK_THROWS_WITH(read(edited("\"images\": 512", "\"images\": 0")), GPUCMP_CONTAINS("images must be a positive whole number"));
}
