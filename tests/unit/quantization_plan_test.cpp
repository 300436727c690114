// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A quantized network's plan on the host: each tensor's scale from its calibrated range, the
// residual's from the layer that wrote it, per-channel weight scales and the dequantize scales
// built from them, weights quantized within half a step (INT8) or E4M3's rounding, a layer
// moved to FP16 with its reason in the per-layer precision report, each bad input named;
// logits compared by top-1 agreement and the largest error over the largest logit; and
// activations layer by layer against a reference's (models/layer_errors.hpp).
#include "catch.hpp"
#include "small_cnn.hpp"

#include <gpucmp/models/layer_errors.hpp>
#include <gpucmp/models/logits_agreement.hpp>
#include <gpucmp/models/quantization_plan.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using gpucmp_test::small_cnn;

// Range i + 1 for the i-th tensor the calibration holds.
gpucmp::calibration_table calibration_of(const gpucmp::network_definition& def) {
  gpucmp::calibration_table t;
  t.model = def.name();
  double range = 1;
  for (const std::string& name : gpucmp::calibration_tensors(def)) t.ranges[name] = range++;
  return t;
}

float fp8_value(std::uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return float(v);
}

}  // namespace

TEST_CASE("a quantization plan scales each tensor by its range and each weight channel by its own", "[models][quantization]") {
  const gpucmp::network_definition def = small_cnn();
  CHECK(gpucmp::calibration_tensors(def) ==
        std::vector<std::string>{"input", "stem", "pool", "block.conv1", "block.conv2", "down", "avg"});
  const gpucmp::calibration_table cal = calibration_of(def);
  const gpucmp::quantization_plan plan(def, cal, gpucmp::numerics::int8);
  REQUIRE(plan.layers().size() == 4);  // the convolutions
  const gpucmp::quantized_layer& stem = plan.layer("stem");
  CHECK(stem.input_scale == Approx(cal.ranges.at("input") / 127));
  CHECK(stem.output_scale == Approx(cal.ranges.at("stem") / 127));
  const gpucmp::quantized_layer& add = plan.layer("block.conv2");
  CHECK(add.input_scale == Approx(cal.ranges.at("block.conv1") / 127));
  // z is the max pool's output, which keeps the stem's scale (a max rounds nothing).
  CHECK(add.residual_scale == Approx(cal.ranges.at("stem") / 127));
  CHECK(plan.layer("block.conv1").input_scale == Approx(cal.ranges.at("stem") / 127));
  // Per-channel weight scales, and the epilogue's dequantize scales built from them.
  const gpucmp::layer_definition& l = def.layers().at(0);
  const std::vector<double> amax = gpucmp::per_channel_amax(l.weight, 16, 3 * 3 * 3);
  REQUIRE(stem.weight_scales.size() == 16);
  for (std::size_t k = 0; k < 16; ++k) {
    CHECK(stem.weight_scales[k] == Approx(amax[k] / 127));
    CHECK(stem.dequantize[k] == Approx(stem.input_scale * stem.weight_scales[k]));
  }
  CHECK(stem.precision == gpucmp::numerics::int8);
  CHECK(stem.reason == "calibrated");
}

TEST_CASE("weights quantize within a half step in INT8 and within E4M3's rounding in FP8", "[models][quantization]") {
  const gpucmp::network_definition def = small_cnn();
  const gpucmp::layer_definition& l = def.layers().at(2);  // block.conv1: 16 x 16 x 3 x 3
  const std::vector<float> krsc = gpucmp::kcrs_to_krsc(l.weight, 16, 16, 3, 3);
  for (gpucmp::numerics format : gpucmp::quantized_network_numerics) {
    const gpucmp::quantization_plan plan(def, calibration_of(def), format);
    const gpucmp::quantized_layer& q = plan.layer("block.conv1");
    const std::vector<std::uint8_t> w = plan.quantized_weights("block.conv1");
    REQUIRE(w.size() == krsc.size());
    const std::size_t per_channel = krsc.size() / 16;
    std::size_t at_top = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double scale = q.weight_scales[i / per_channel], exact = double(krsc[i]) / scale;
      const double stored = format == gpucmp::numerics::int8 ? double(static_cast<std::int8_t>(w[i])) : double(fp8_value(w[i]));
      const double allowed = format == gpucmp::numerics::int8 ? 0.5 : std::fabs(exact) / 16 + 0.001953125 / 2;
      INFO(gpucmp::to_string(format) << " weight " << i << ": " << stored << " for " << exact);
      CHECK(std::fabs(stored - exact) <= allowed + 1e-12);
      at_top += std::fabs(stored) == (format == gpucmp::numerics::int8 ? 127.0 : 448.0);
    }
    CHECK(at_top >= 16);  // each channel's largest weight lands on the format's largest value
  }
}

TEST_CASE("a layer moved to FP16 says why in the per-layer precision report", "[models][quantization]") {
  const gpucmp::network_definition def = small_cnn();
  gpucmp::quantization_plan plan(def, calibration_of(def), gpucmp::numerics::fp8_e4m3);
  plan.fall_back("stem", "FP16 faster: 84 against 568 us");
  CHECK(plan.layer("stem").precision == gpucmp::numerics::fp16);
  const std::string report = plan.report();
  CHECK(report.find("| stem | fp16 | FP16 faster: 84 against 568 us |") != std::string::npos);
  CHECK(report.find("| down | fp8_e4m3 | calibrated |") != std::string::npos);
  std::size_t rows = 0;
  for (char c : report) rows += c == '\n';
  CHECK(rows == 2 + 4);  // header, rule, one row per convolution
}

TEST_CASE("a quantization plan names what is wrong", "[models][quantization]") {
  const gpucmp::network_definition def = small_cnn();
  gpucmp::calibration_table cal = calibration_of(def);
  CHECK_THROWS_WITH(gpucmp::quantization_plan(def, cal, gpucmp::numerics::fp16), GPUCMP_CONTAINS("does not run fp16"));
  cal.ranges.erase("block.conv1");
  CHECK_THROWS_WITH(gpucmp::quantization_plan(def, cal, gpucmp::numerics::int8),
                    GPUCMP_CONTAINS("small_cnn: the calibration has no range for tensor 'block.conv1'"));
  gpucmp::quantization_plan plan(def, calibration_of(def), gpucmp::numerics::int8);
  CHECK_THROWS_WITH(plan.fall_back("pool", "x"), GPUCMP_CONTAINS("no convolution 'pool' in the quantization plan"));
}

TEST_CASE("logits agree by top-1 and by the largest error over the largest logit", "[models][quantization]") {
  // Two images of three classes; the second's top-1 moves from class 2 to class 0.
  const std::vector<float> reference{1.0f, 4.0f, 2.0f, 3.0f, 0.5f, 3.5f};
  const std::vector<float> got{1.1f, 3.9f, 2.0f, 3.6f, 0.5f, 3.4f};
  const gpucmp::logits_agreement a = gpucmp::compare_logits(reference, got, 3);
  CHECK(a.images == 2);
  CHECK(a.same_top1 == 1);
  CHECK(a.top1_agreement() == 0.5);
  CHECK(a.max_relative_error == Approx(0.6 / 4.0));
  CHECK(a.reference_classes == 2);  // classes 1 and 2
  CHECK(gpucmp::compare_logits(std::vector<float>{0, 1, 0, 2}, std::vector<float>{0, 1, 0, 2}, 2).reference_classes == 1);
  CHECK_THROWS_WITH(gpucmp::compare_logits(reference, std::vector<float>(5, 0.0f), 3),
                    GPUCMP_CONTAINS("5 logits against 6 of 3 classes"));
  std::vector<float> broken = got;
  broken[4] = NAN;
  CHECK_THROWS_WITH(gpucmp::compare_logits(reference, broken, 3), GPUCMP_CONTAINS("image 1, class 1 is not finite"));
}

TEST_CASE("centred logits agree where a common part gives every image one class", "[models][quantization]") {
  // Class 0 leads every image by a common 10; the images differ in what is left. Centred on
  // each class's mean reference logit (10.1667, 0.3333, 0.3333), the top-1 classes are 1, 2
  // and 0, and the second image's error moves its top-1 from 2 to 1.
  const std::vector<float> reference{10.0f, 1.0f, 0.0f, 10.0f, 0.0f, 1.0f, 10.5f, 0.0f, 0.0f};
  const std::vector<float> got{10.0f, 1.0f, 0.0f, 10.0f, 0.9f, 0.2f, 10.5f, 0.0f, 0.0f};
  const gpucmp::logits_agreement a = gpucmp::compare_logits(reference, got, 3);
  CHECK(a.reference_classes == 1);
  CHECK(a.same_top1 == 3);
  CHECK(a.max_relative_error == Approx(0.9 / 10.5));
  CHECK(a.centred_reference_classes == 3);
  CHECK(a.centred_same_top1 == 2);
  CHECK(a.centred_top1_agreement() == Approx(2.0 / 3.0));
  CHECK(a.centred_max_relative_error == Approx(0.9 / (2.0 / 3.0)));
  // Identical logits agree everywhere, centred too, with no error.
  const gpucmp::logits_agreement same = gpucmp::compare_logits(reference, reference, 3);
  CHECK(same.centred_same_top1 == 3);
  CHECK(same.centred_max_relative_error == 0.0);
}

TEST_CASE("activations compare by RMS, by the images' variation and by the largest error", "[models][quantization]") {
  // Two images of three positions; the images' mean is 2 everywhere, so the variation is
  // (-1, 0, 1, 1, 0, -1): rms 2 against the reference's sqrt(28), and one error of 0.5.
  const std::vector<float> reference{1, 2, 3, 3, 2, 1};
  const std::vector<float> got{1, 2, 3.5f, 3, 2, 1};
  const gpucmp::activation_error e = gpucmp::compare_activations(reference, got, 2);
  CHECK(e.relative_rms == Approx(0.5 / std::sqrt(28.0)));
  CHECK(e.relative_to_variation == Approx(0.25));
  CHECK(e.max_relative == Approx(0.5 / 3.0));
  // Images alike have no variation: an error against none is infinite, no error is none.
  const std::vector<float> alike{5, 6, 5, 6};
  CHECK(std::isinf(gpucmp::compare_activations(alike, std::vector<float>{5, 6, 5, 6.5f}, 2).relative_to_variation));
  CHECK(gpucmp::compare_activations(alike, alike, 2).relative_to_variation == 0.0);
  CHECK_THROWS_WITH(gpucmp::compare_activations(reference, got, 1), GPUCMP_CONTAINS("at least two"));
  CHECK_THROWS_WITH(gpucmp::compare_activations(reference, got, 4), GPUCMP_CONTAINS("6 values against 6 in 4 images"));
  CHECK_THROWS_WITH(gpucmp::compare_activations(reference, alike, 2), GPUCMP_CONTAINS("4 values against 6"));
  std::vector<float> broken = got;
  broken[4] = INFINITY;
  CHECK_THROWS_WITH(gpucmp::compare_activations(reference, broken, 2), GPUCMP_CONTAINS("image 1, position 1 is not finite"));
}

namespace {

// A network run layer by layer, as layer_errors drives one: layer i's output at position p of
// image n is gain x (1 + i + image n's first input value + p / 1000). Like a network that
// reuses buffers, only the layer just run can be read; images past those layer_errors set are
// NaN, so comparing them would throw.
struct layered_stand_in {
  struct options_t {
    std::int64_t batch = 0;
  };
  layered_stand_in(const gpucmp::network_definition& d, std::int64_t batch, double g = 1) : def(&d), batch_of{batch}, gain(g) {}
  const gpucmp::network_definition* def;
  options_t batch_of;
  double gain;
  std::vector<float> input;
  std::vector<std::size_t> run;

  const gpucmp::network_definition& definition() const { return *def; }
  const options_t& options() const { return batch_of; }
  void set_input(const std::vector<float>& in, cudaStream_t) {
    REQUIRE(std::int64_t(in.size()) == batch_of.batch * def->shape(def->input()).elements());
    input = in;
  }
  void run_layer(std::size_t i, cudaStream_t) { run.push_back(i); }
  std::vector<float> activation_values(gpucmp::tensor_ref t, cudaStream_t) const {
    REQUIRE(!run.empty());
    const std::size_t last = run.back();
    if (def->layers().at(last).output.id != t.id) throw gpucmp::invalid_argument("stand-in: not the layer just run");
    const std::int64_t per_image = def->shape(t).elements(), per_input = def->shape(def->input()).elements();
    std::vector<float> v(std::size_t(batch_of.batch * per_image));
    for (std::int64_t n = 0; n < batch_of.batch; ++n)
      for (std::int64_t p = 0; p < per_image; ++p) {
        const float first = input[std::size_t(n * per_input)];
        v[std::size_t(n * per_image + p)] =
            first == 0 ? NAN : float(gain * (1.0 + double(last) + first + double(p) / 1000.0));
      }
    return v;
  }
};

}  // namespace

TEST_CASE("layer errors compare two networks' outputs layer by layer on the images given", "[models][quantization]") {
  const gpucmp::network_definition def = gpucmp_test::small_cnn(true);
  layered_stand_in reference(def, 4);
  layered_stand_in net(def, 8, 1.01);
  const std::int64_t per_input = def.shape(def.input()).elements();
  std::vector<float> images(std::size_t(3 * per_input));
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = float(1 + i / std::size_t(per_input));  // image n: n + 1
  const std::vector<gpucmp::layer_error> rows = gpucmp::layer_errors(reference, net, images, nullptr);
  REQUIRE(rows.size() == def.layers().size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].layer);
    CHECK(rows[i].layer == def.layers()[i].name);
    CHECK(rows[i].kind == gpucmp::to_string(def.layers()[i].kind));
    CHECK(rows[i].error.relative_rms == Approx(0.01));
    CHECK(rows[i].error.max_relative == Approx(0.01));
    CHECK(rows[i].error.relative_to_variation > rows[i].error.relative_rms);  // the images differ by less than they hold
    CHECK(reference.run[i] == i);
    CHECK(net.run[i] == i);
  }
  // Too few or too many images, or a definition that is not the reference's, are named.
  CHECK_THROWS_WITH(gpucmp::layer_errors(reference, net, std::vector<float>(images.begin(), images.begin() + per_input), nullptr),
                    GPUCMP_CONTAINS("not between 2 and 4 images"));
  CHECK_THROWS_WITH(gpucmp::layer_errors(reference, net, std::vector<float>(std::size_t(5 * per_input), 1.0f), nullptr),
                    GPUCMP_CONTAINS("not between 2 and 4 images"));
  const gpucmp::network_definition other = gpucmp_test::small_cnn(false);
  layered_stand_in short_one(other, 8);
  CHECK_THROWS_WITH(gpucmp::layer_errors(reference, short_one, images, nullptr),
                    GPUCMP_CONTAINS("another definition than the reference's (small_cnn, 8 layers, against small_cnn, 9 layers)"));
}
