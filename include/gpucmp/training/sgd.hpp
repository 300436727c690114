// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// SGD with momentum and weight decay: the options and the update of one parameter, the
// reference the fused multi-tensor update (training/sgd.cuh) is tested against. The rule is
// torch.optim.SGD's with dampening 0, so a gpucmp step and a PyTorch step move the weights
// alike: d = g + weight_decay p; the momentum buffer starts as d and then becomes
// momentum buf + d; the step is buf (or d + momentum buf with Nesterov); p -= lr step.
// Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <string>

namespace gpucmp {

/// Settings of SGD (the ResNet-50 reference run's: momentum 0.9, weight decay 5e-5).
struct sgd_options {
  float learning_rate = 0.1f;  ///< step size
  float momentum = 0.9f;       ///< 0: plain SGD, no buffer
  float weight_decay = 5e-5f;  ///< L2 penalty added to the gradient (torch's weight_decay)
  bool nesterov = false;       ///< Nesterov momentum

  /// Throws invalid_argument naming the first field that breaks its rule.
  void validate() const {
    auto require = [](bool ok, const char* what) {
      if (!ok) throw invalid_argument(std::string("sgd_options: ") + what);
    };
    require(std::isfinite(learning_rate) && learning_rate > 0, "learning_rate must be finite and > 0");
    require(std::isfinite(momentum) && momentum >= 0 && momentum < 1, "momentum must be in [0, 1)");
    require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay must be finite and >= 0");
    require(!nesterov || momentum > 0, "nesterov needs momentum > 0");
  }
};

/// One parameter's SGD step (the reference): `gradient` already unscaled; `first_step` when
/// the momentum buffer has not been written yet (torch creates it on the first step taken).
inline void sgd_update_reference(float& param, float gradient, float& momentum_buffer, bool first_step,
                                 const sgd_options& o) noexcept {
  float d = gradient + o.weight_decay * param;
  if (o.momentum != 0) {
    momentum_buffer = first_step ? d : o.momentum * momentum_buffer + d;
    d = o.nesterov ? d + o.momentum * momentum_buffer : momentum_buffer;
  }
  param -= o.learning_rate * d;
}

}  // namespace gpucmp
