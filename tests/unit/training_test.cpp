// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Host tests of the training step's declared work (training/training_work.hpp) and of the
// dynamic loss-scale state machine (training/loss_scale.hpp), the reference the device's
// update is tested against on a GPU (tests/gpu/training_test.cu).
#include "catch.hpp"

#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/training/loss_scale.hpp>
#include <gpucmp/training/training_work.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

TEST_CASE("a ResNet-50 v1.5 training step is 24.3 GFLOP per image: forward, data and weight gradients", "[training][work]") {
  const gpucmp::training_flops t = gpucmp::training_flops_per_image(gpucmp::resnet50_definition());
  // 53 convolutions and the classifier (shared/data/resnet50-v1.5.md: 4,089,184,256 MACs).
  CHECK(t.layers.size() == 54);
  CHECK(t.forward == 2.0 * 4089184256.0);
  CHECK(t.weight_gradient == t.forward);
  // The stem reads the images, whose gradient nobody needs: 7x7x3x64 weights over 112x112 outputs.
  const double stem_macs = 7.0 * 7 * 3 * 64 * 112 * 112;
  CHECK(stem_macs == 118013952.0);
  CHECK(t.layers.front().data_gradient == 0);
  CHECK(t.layers.front().forward == 2 * stem_macs);
  CHECK(t.data_gradient == 2.0 * (4089184256.0 - stem_macs));
  CHECK(t.total() == 24299077632.0);
  // The classifier: 2048 x 1000 multiply-adds, all three passes.
  CHECK(t.layers.back().forward == 2.0 * 2048 * 1000);
  CHECK(t.layers.back().total() == 3 * 2.0 * 2048 * 1000);
  double summed = 0;
  for (const auto& l : t.layers) summed += l.total();
  CHECK(summed == t.total());
}

TEST_CASE("only layers that read the network's input skip their data gradient; pooling does no matrix work", "[training][work]") {
  gpucmp::network_definition def("two_branches", {3, 8, 8});
  auto a = def.conv(def.input(), {4, 3, 1, 1, true}, "a");         // reads the input
  auto b = def.conv(def.input(), {4, 1, 1, 0, true}, "b", a);      // reads the input too
  auto c = def.conv(def.max_pool(b, 2, 2), {6, 3, 1, 1, true}, "c");
  def.linear(def.global_average_pool(c), 5, "fc");
  const gpucmp::training_flops t = gpucmp::training_flops_per_image(def);
  REQUIRE(t.layers.size() == 4);
  CHECK(t.layers[0].name == "a");
  CHECK(t.layers[0].forward == 2.0 * (4 * 3 * 3 * 3) * 64);
  CHECK(t.layers[0].data_gradient == 0);
  CHECK(t.layers[1].data_gradient == 0);
  CHECK(t.layers[2].name == "c");
  CHECK(t.layers[2].forward == 2.0 * (6 * 4 * 3 * 3) * 16);
  CHECK(t.layers[2].data_gradient == t.layers[2].forward);
  CHECK(t.layers[3].total() == 3 * 2.0 * 6 * 5);
}

TEST_CASE("the loss scale backs off on a non-finite gradient and grows after growth_interval clean steps", "[training][loss_scale]") {
  gpucmp::loss_scale_options o;
  o.initial_scale = 1024;
  o.growth_interval = 3;
  gpucmp::loss_scale_state s = gpucmp::initial_loss_scale(o);
  CHECK(s.scale == 1024);
  // Two clean steps: counted, no growth yet.
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK(s.growth_tracker == 2);
  CHECK(s.scale == 1024);
  // The third grows the scale and restarts the count.
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK(s.scale == 2048);
  CHECK(s.growth_tracker == 0);
  // A non-finite gradient: the step is skipped, the scale halves, the count restarts.
  CHECK(gpucmp::update_loss_scale(s, false, o) == false);
  CHECK(gpucmp::update_loss_scale(s, true, o));
  CHECK(s.scale == 1024);
  CHECK(s.growth_tracker == 0);
  CHECK(s.steps == 5);
  CHECK(s.skipped_steps == 1);
  // Growth needs growth_interval clean steps in a row again.
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK(s.scale == 1024);
  CHECK_FALSE(gpucmp::update_loss_scale(s, false, o));
  CHECK(s.scale == 2048);
}

TEST_CASE("the loss scale never grows to infinity and keeps backing off", "[training][loss_scale]") {
  gpucmp::loss_scale_options o;
  o.initial_scale = std::numeric_limits<float>::max() / 1.5f;
  o.growth_interval = 1;
  gpucmp::loss_scale_state s = gpucmp::initial_loss_scale(o);
  gpucmp::update_loss_scale(s, false, o);  // 2x would overflow FP32: the scale stays
  CHECK(std::isfinite(s.scale));
  CHECK(s.scale == o.initial_scale);
  CHECK(s.growth_tracker == 0);
  for (int i = 0; i < 300; ++i) gpucmp::update_loss_scale(s, true, o);  // every step overflows: 2^-300 of it
  CHECK(s.skipped_steps == 300);
  CHECK(s.scale >= 0);
  CHECK(s.scale < 1e-30f);
}

TEST_CASE("loss-scale options name the field that is wrong", "[training][loss_scale]") {
  auto message = [](gpucmp::loss_scale_options o) {
    try {
      o.validate();
    } catch (const gpucmp::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  gpucmp::loss_scale_options o;
  CHECK(message(o).empty());
  o.initial_scale = 0;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("initial_scale"));
  o = {};
  o.growth_factor = 1;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("growth_factor"));
  o = {};
  o.backoff_factor = 1;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("backoff_factor"));
  o = {};
  o.growth_interval = 0;
  CHECK_THAT(message(o), GPUCMP_CONTAINS("growth_interval"));
  o = {};
  o.initial_scale = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(gpucmp::initial_loss_scale(o), gpucmp::invalid_argument);
}
