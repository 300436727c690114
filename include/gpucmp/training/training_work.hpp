// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The declared work of one training step of a network, per image and per layer: what
// images/s becomes TFLOP/s and % of peak with. Host-only.
//
// Convention (the one MLPerf and the frameworks' FLOP counters use for the matrix work):
// 2 FLOPs per multiply-add of every convolution and linear layer, counted three times:
//   forward          y = W x
//   data gradient    dx = W^T dy, for every layer but those that read the network's input
//                    (no gradient of the images is needed: the stem's data gradient is not run)
//   weight gradient  dW = dy x^T
// Batch norm, ReLU, residual adds, pooling, bias gradients, the loss and the optimizer are
// element-wise (about 1 % of ResNet-50's step) and are not counted; their bytes are the
// memory plan's business. A ResNet-50 v1.5 step is then 24.30 GFLOP per image, slightly
// under 3x its 8.18 GFLOP forward pass.
#pragma once

#include <gpucmp/models/network_definition.hpp>

#include <string>
#include <vector>

namespace gpucmp {

/// One layer's FLOPs per image in a training step (0 where the layer does no matrix work).
struct layer_training_flops {
  std::string name;            ///< the layer's name in its definition
  double forward = 0;          ///< 2 x multiply-adds of the forward pass
  double data_gradient = 0;    ///< the same again, unless the layer reads the network's input
  double weight_gradient = 0;  ///< the same again, for layers with weights
  /// forward + data_gradient + weight_gradient.
  double total() const noexcept { return forward + data_gradient + weight_gradient; }
};

/// A training step's FLOPs per image, by layer and in total (the convention above).
struct training_flops {
  std::vector<layer_training_flops> layers;  ///< every convolution and linear layer, in order
  double forward = 0;          ///< summed over the layers
  double data_gradient = 0;    ///< summed over the layers
  double weight_gradient = 0;  ///< summed over the layers
  /// The whole step.
  double total() const noexcept { return forward + data_gradient + weight_gradient; }
};

/// FLOPs per image of one training step of `def` (forward, both gradients; header comment).
inline training_flops training_flops_per_image(const network_definition& def) {
  training_flops t;
  for (const layer_definition& l : def.layers()) {
    double macs = 0;
    if (l.kind == layer_kind::conv) {
      const image_shape& out = def.shape(l.output);
      macs = double(l.weight.size()) * double(out.h * out.w);
    } else if (l.kind == layer_kind::linear) {
      macs = double(l.weight.size());
    } else {
      continue;
    }
    layer_training_flops f;
    f.name = l.name;
    f.forward = 2 * macs;
    f.data_gradient = l.input.id == def.input().id ? 0.0 : 2 * macs;
    f.weight_gradient = 2 * macs;
    t.forward += f.forward;
    t.data_gradient += f.data_gradient;
    t.weight_gradient += f.weight_gradient;
    t.layers.push_back(std::move(f));
  }
  return t;
}

}  // namespace gpucmp
