// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Network definitions on the host: ResNet-50 v1.5's layer table, parameter and MAC counts
// asserted exactly, the bottleneck wiring (shortcuts, downsamples, strides), deterministic
// random weights, and every shape error a user can make.
#include "catch.hpp"

#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/models/resnet18.hpp>
#include <gpucmp/models/resnet50.hpp>

#include <cmath>
#include <cstdint>
#include <string>

TEST_CASE("ResNet-50 v1.5 has torchvision's layers and MAC and parameter counts", "[models][resnet50]") {
  const gpucmp::network_definition def = gpucmp::resnet50_definition();
  int convs = 0, with_residual = 0, without_relu = 0;
  std::int64_t conv_biases = 0;
  for (const auto& l : def.layers()) {
    if (l.kind != gpucmp::layer_kind::conv) continue;
    ++convs;
    conv_biases += l.conv.out_channels;
    if (l.residual.valid()) ++with_residual;
    if (!l.conv.relu) ++without_relu;
  }
  CHECK(convs == 53);
  CHECK(with_residual == 16);  // every bottleneck's conv3
  CHECK(without_relu == 4);    // the downsamples
  CHECK(def.layers().size() == 53 + 3);  // + maxpool, avgpool, fc
  CHECK(def.macs_per_image() == 4089184256.0);
  // Folding replaces each batch norm's gamma and beta (2K values) by one bias (K values).
  CHECK(def.parameter_count() + conv_biases == 25557032);
  CHECK(def.shape(def.output()) == gpucmp::image_shape{1000, 1, 1});
  CHECK(def.float_from(def.output()));
}

TEST_CASE("ResNet-18 has torchvision's layers, wiring and MAC and parameter counts", "[models][resnet18]") {
  gpucmp::network_definition def = gpucmp::resnet18_definition();
  int convs = 0, with_residual = 0, without_relu = 0;
  std::int64_t conv_biases = 0;
  for (const auto& l : def.layers()) {
    if (l.kind != gpucmp::layer_kind::conv) continue;
    ++convs;
    conv_biases += l.conv.out_channels;
    if (l.residual.valid()) ++with_residual;
    if (!l.conv.relu) ++without_relu;
  }
  CHECK(convs == 20);          // the stem, 8 basic blocks of two, 3 downsamples
  CHECK(with_residual == 8);   // every block's conv2
  CHECK(without_relu == 3);    // the downsamples
  CHECK(conv_biases == 4800);  // torchvision's batch norm channels
  // torchvision.models.resnet18(): 1,814,073,344 multiply-adds per 224 x 224 image and
  // 11,689,512 parameters, of which batch norms' gamma and beta are 2 x 4,800.
  CHECK(def.macs_per_image() == 1814073344.0);
  CHECK(def.parameter_count() + conv_biases == 11689512);
  CHECK(def.layer("layer2.0.conv1").conv.stride == 2);
  CHECK(def.layer("layer2.0.downsample").conv.stride == 2);
  CHECK(def.layer("layer2.0.conv2").residual.id == def.layer("layer2.0.downsample").output.id);
  CHECK(def.layer("layer2.1.conv2").residual.id == def.layer("layer2.0.conv2").output.id);
  CHECK_THROWS(def.layer("layer1.0.downsample"));  // 64 -> 64 at stride 1: the identity
  CHECK(def.shape(def.layer("layer4.1.conv2").output) == gpucmp::image_shape{512, 7, 7});
  CHECK(def.shape(def.output()) == gpucmp::image_shape{1000, 1, 1});
}

TEST_CASE("ResNet-50 bottlenecks are wired as torchvision's", "[models][resnet50]") {
  gpucmp::network_definition def = gpucmp::resnet50_definition();
  // v1.5: the stride sits on the 3x3 convolution of each stage's first block.
  CHECK(def.layer("layer2.0.conv1").conv.stride == 1);
  CHECK(def.layer("layer2.0.conv2").conv.stride == 2);
  CHECK(def.layer("layer2.0.downsample").conv.stride == 2);
  // A downsampled block adds the downsample's output; the others add the block's input.
  const auto& conv3 = def.layer("layer2.0.conv3");
  CHECK(conv3.residual.id == def.layer("layer2.0.downsample").output.id);
  const auto& plain = def.layer("layer2.1.conv3");
  CHECK(plain.residual.id == def.layer("layer2.0.conv3").output.id);
  CHECK(def.layer("layer2.1.conv1").input.id == def.layer("layer2.0.conv3").output.id);
  CHECK(def.shape(def.layer("maxpool").output) == gpucmp::image_shape{64, 56, 56});
  CHECK(def.shape(def.layer("layer4.2.conv3").output) == gpucmp::image_shape{2048, 7, 7});
}

TEST_CASE("random weights are deterministic and scaled and non-zero", "[models]") {
  const gpucmp::network_definition a = gpucmp::resnet50_random(3), b = gpucmp::resnet50_random(3),
                                   c = gpucmp::resnet50_random(4);
  const auto& wa = a.layers()[0].weight;
  CHECK(wa == b.layers()[0].weight);
  CHECK(wa != c.layers()[0].weight);
  // He-uniform: variance 2 / fan-in (3 x 7 x 7 for the stem).
  double sum = 0, squares = 0;
  for (float v : wa) {
    sum += v;
    squares += double(v) * v;
  }
  const double variance = squares / double(wa.size()) - std::pow(sum / double(wa.size()), 2);
  CHECK(variance == Approx(2.0 / 147.0).epsilon(0.1));
  // A residual branch's last convolution is scaled down (0.25 by default).
  gpucmp::network_definition d = gpucmp::resnet50_random(3);
  double branch = 0;
  for (float v : d.layer("layer1.0.conv3").weight) branch = std::fmax(branch, std::fabs(v));
  CHECK(branch <= 0.25 * std::sqrt(6.0 / 64.0) + 1e-7);
  CHECK(branch > 0.2 * std::sqrt(6.0 / 64.0));
}

TEST_CASE("a custom CNN takes a few lines and shape errors name the layer", "[models]") {
  gpucmp::network_definition def("tiny", {3, 32, 32});
  auto x = def.conv(def.input(), {16, 3, 1, 1, true}, "c1");
  auto y = def.conv(x, {16, 3, 1, 1, true}, "c2", x);
  y = def.max_pool(y, 2, 2);
  y = def.average_pool(y, 3, 1, 1);
  y = def.global_average_pool(y);
  y = def.softmax(def.linear(y, 10, "fc"));
  CHECK(def.shape(y) == gpucmp::image_shape{10, 1, 1});
  CHECK(def.macs_per_image() == 16.0 * 3 * 9 * 32 * 32 + 16.0 * 16 * 9 * 32 * 32 + 10 * 16);  // c1 + c2 + fc

  auto message = [](auto&& f) {
    try {
      f();
    } catch (const gpucmp::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message([&] { def.conv(x, {8, 1, 1, 0, true}, "bad", def.input()); }),
             GPUCMP_CONTAINS("residual is 3x32x32, the output 8x32x32"));
  CHECK_THAT(message([&] { def.linear(x, 10, "flat"); }), GPUCMP_CONTAINS("needs a flat input"));
  CHECK_THAT(message([&] { def.conv(x, {8, 65, 1, 0, true}, "huge"); }), GPUCMP_CONTAINS("larger than the padded"));
  CHECK_THAT(message([&] { def.conv(x, {8, 1, 1, 0, true}, "c1"); }), GPUCMP_CONTAINS("two layers are named 'c1'"));
  CHECK_THAT(message([&] { def.max_pool(x, 2, 2, 2); }), GPUCMP_CONTAINS("padding at most half the kernel"));
  CHECK_THAT(message([&] { def.softmax(x); }), GPUCMP_CONTAINS("must follow a linear layer"));
  CHECK_THAT(message([&] { def.layer("nope"); }), GPUCMP_CONTAINS("no layer named 'nope'"));
}

TEST_CASE("memory plans reuse dead tensors' buffers and never alias live ones", "[models][memory]") {
  const gpucmp::network_definition def = gpucmp::resnet50_definition();
  const auto plan = gpucmp::plan_network_memory(def, 64, gpucmp::numerics::fp16);
  CHECK(plan.activation_bytes < plan.activation_bytes_without_reuse / 4);
  // FP16 parameters: every weight and bias in 2 bytes, the classifier's bias in FP32.
  CHECK(plan.parameter_bytes == std::size_t(def.parameter_count() - 1000) * 2 + 1000 * 4);
  // Walk the layers: a layer's output buffer never holds a tensor still to be read, and the
  // input's buffer is never handed out again.
  const auto& layers = def.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::size_t out_slot = plan.slot_of[std::size_t(layers[i].output.id)];
    CHECK(out_slot != plan.slot_of[0]);
    CHECK(plan.slot_bytes[out_slot] >= gpucmp::tensor_bytes(def, layers[i].output, 64, gpucmp::numerics::fp16));
    for (std::size_t j = i + 1; j < layers.size(); ++j) {
      for (gpucmp::tensor_ref read : {layers[j].input, layers[j].residual}) {
        if (!read.valid() || read.id > layers[i].output.id || read.id == layers[i].output.id) continue;
        INFO(layers[i].name << " writes over " << read.id << ", which " << layers[j].name << " reads");
        CHECK(plan.slot_of[std::size_t(read.id)] != out_slot);
      }
    }
  }
  // Twice the batch, about twice the activations.
  const auto twice = gpucmp::plan_network_memory(def, 128, gpucmp::numerics::fp16);
  CHECK(double(twice.activation_bytes) == Approx(2.0 * double(plan.activation_bytes)).epsilon(0.01));
}

TEST_CASE("the largest batch that fits is the boundary of the plan", "[models][memory]") {
  const gpucmp::network_definition def = gpucmp::resnet50_definition();
  const std::size_t free_bytes = std::size_t{10} << 30;
  const std::int64_t b = gpucmp::largest_batch_that_fits(def, gpucmp::numerics::fp16, free_bytes);
  CHECK(b > 16);
  CHECK(gpucmp::plan_network_memory(def, b, gpucmp::numerics::fp16).total(gpucmp::network_workspace_reserve) <= free_bytes);
  CHECK(gpucmp::plan_network_memory(def, b + 1, gpucmp::numerics::fp16).total(gpucmp::network_workspace_reserve) > free_bytes);
  CHECK(gpucmp::largest_batch_that_fits(def, gpucmp::numerics::fp32, free_bytes) < b);
  CHECK(gpucmp::largest_batch_that_fits(def, gpucmp::numerics::fp16, 1 << 20) == 0);
}
