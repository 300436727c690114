// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// ResNet-50 v1.5 exactly as torchvision defines it (stride on each stage's first 3x3
// convolution), as a network_definition for inference: every batch norm folded into its
// convolution, so a bottleneck is conv1 (+bias, ReLU), conv2 (+bias, ReLU), the downsample
// (+bias) where the stage starts, and conv3 (+bias, + shortcut, ReLU). Layer names are
// torchvision's module names. Host-only.
#pragma once

#include <gpucmp/data/resnet50_v1_5.hpp>
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/models/resnet50_weights.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

namespace detail {
inline conv_spec resnet_conv_spec(const data::conv_layer& l, bool relu) {
  conv_spec s;
  s.out_channels = l.out_channels;
  s.kernel = l.kernel;
  s.stride = l.stride;
  s.pad = l.padding;
  s.relu = relu;
  return s;
}
}  // namespace detail

/// ResNet-50 v1.5 for 224 x 224 RGB images, parameters zero (load or init_random them).
inline network_definition resnet50_definition() {
  network_definition def("resnet50", {3, 224, 224});
  const auto& convs = data::resnet50_v1_5_convs;
  tensor_ref x = def.conv(def.input(), detail::resnet_conv_spec(convs[0], true), convs[0].name);
  x = def.max_pool(x, 3, 2, 1, "maxpool");
  const std::size_t count = sizeof(convs) / sizeof(convs[0]);
  for (std::size_t i = 1; i < count;) {
    // One bottleneck: conv1, conv2, conv3 and maybe a downsample (listed after conv3).
    const std::string block = std::string(convs[i].name).substr(0, std::string(convs[i].name).rfind('.'));
    const bool has_downsample = i + 3 < count && std::string(convs[i + 3].name) == block + ".downsample";
    const tensor_ref block_input = x;
    tensor_ref y = def.conv(block_input, detail::resnet_conv_spec(convs[i], true), convs[i].name);
    y = def.conv(y, detail::resnet_conv_spec(convs[i + 1], true), convs[i + 1].name);
    tensor_ref shortcut = block_input;
    if (has_downsample) shortcut = def.conv(block_input, detail::resnet_conv_spec(convs[i + 3], false), convs[i + 3].name);
    x = def.conv(y, detail::resnet_conv_spec(convs[i + 2], true), convs[i + 2].name, shortcut);
    i += has_downsample ? 4 : 3;
  }
  x = def.global_average_pool(x, "avgpool");
  def.linear(x, data::resnet50_fc_out, "fc");
  return def;
}

/// Copies folded weights (load_resnet50_folded) into `def`, a resnet50_definition().
inline void set_resnet50_weights(network_definition& def, const resnet50_folded_weights& weights) {
  std::size_t i = 0;
  for (const data::conv_layer& l : data::resnet50_v1_5_convs) {
    layer_definition& layer = def.layer(l.name);
    const folded_conv& folded = weights.convs.at(i++);
    if (folded.weight.size() != layer.weight.size() || folded.bias.size() != layer.bias.size()) {
      throw weight_error(std::string("ResNet-50 layer '") + l.name + "': folded weights have " +
                         std::to_string(folded.weight.size()) + " values, the layer needs " + std::to_string(layer.weight.size()));
    }
    layer.weight = folded.weight;
    layer.bias = folded.bias;
  }
  layer_definition& fc = def.layer("fc");
  if (weights.fc_weight.size() != fc.weight.size() || weights.fc_bias.size() != fc.bias.size()) {
    throw weight_error("ResNet-50 layer 'fc': the weights have the wrong size");
  }
  fc.weight = weights.fc_weight;
  fc.bias = weights.fc_bias;
}

/// ResNet-50 v1.5 with the weights of a torchvision state_dict saved as safetensors
/// (scripts/models/export_resnet50.py); errors name the file, the tensor and the problem.
inline network_definition resnet50_from_file(const std::string& path) {
  network_definition def = resnet50_definition();
  set_resnet50_weights(def, load_resnet50_folded(safetensors_file::open(path)));
  return def;
}

/// ResNet-50 v1.5 with deterministic random weights (network_definition::init_random).
inline network_definition resnet50_random(std::uint64_t seed = 1) {
  network_definition def = resnet50_definition();
  def.init_random(seed);
  return def;
}

}  // namespace gpucmp
