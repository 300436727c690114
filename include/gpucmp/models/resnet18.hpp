// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// ResNet-18 as torchvision defines it (basic blocks of two 3x3 convolutions, the stride on
// each stage's first block and a 1x1 downsample beside it), as a network_definition for
// inference with every batch norm folded into its convolution. Layer names are torchvision's
// module names. Added by following docs/architecture.md's "Adding a model". Host-only.
#pragma once

#include <gpucmp/models/network_definition.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

/// ResNet-18 for 224 x 224 RGB images and 1,000 classes, parameters zero (init_random them
/// or set each layer's folded weight and bias).
inline network_definition resnet18_definition() {
  network_definition def("resnet18", {3, 224, 224});
  tensor_ref x = def.conv(def.input(), {64, 7, 2, 3, true}, "conv1");
  x = def.max_pool(x, 3, 2, 1, "maxpool");
  const std::int64_t widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < 2; ++block) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      const tensor_ref block_input = x;
      const tensor_ref y = def.conv(block_input, {widths[stage], 3, stride, 1, true}, name + ".conv1");
      tensor_ref shortcut = block_input;
      if (stride != 1 || def.shape(block_input).c != widths[stage]) {
        shortcut = def.conv(block_input, {widths[stage], 1, stride, 0, false}, name + ".downsample");
      }
      x = def.conv(y, {widths[stage], 3, 1, 1, true}, name + ".conv2", shortcut);
    }
  }
  x = def.global_average_pool(x, "avgpool");
  def.linear(x, 1000, "fc");
  return def;
}

/// ResNet-18 with deterministic random weights (network_definition::init_random).
inline network_definition resnet18_random(std::uint64_t seed = 1) {
  network_definition def = resnet18_definition();
  def.init_random(seed);
  return def;
}

}  // namespace gpucmp
