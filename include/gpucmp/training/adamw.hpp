// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// AdamW: the options and the update of one parameter, the reference a fused multi-tensor
// update is tested against. The rule is torch.optim.AdamW's (amsgrad off), so a gpucmp step
// and a PyTorch step move the weights alike: the weight decays first (p -= lr wd p), then
// m = beta1 m + (1 - beta1) g and v = beta2 v + (1 - beta2) g^2, and
// p -= lr / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps) at step t (1 for the
// first). Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace gpucmp {

/// Settings of AdamW (PyTorch's defaults).
struct adamw_options {
  double learning_rate = 1e-3;  ///< step size
  double beta1 = 0.9;           ///< first moment's decay
  double beta2 = 0.999;         ///< second moment's decay
  double eps = 1e-8;            ///< added to the second moment's root
  double weight_decay = 0.01;   ///< decoupled: the weight shrinks by lr x weight_decay each step

  /// Throws invalid_argument naming the first field that breaks its rule.
  void validate() const {
    auto require = [](bool ok, const char* what) {
      if (!ok) throw invalid_argument(std::string("adamw_options: ") + what);
    };
    require(std::isfinite(learning_rate) && learning_rate > 0, "learning_rate must be finite and > 0");
    require(beta1 >= 0 && beta1 < 1, "beta1 must be in [0, 1)");
    require(beta2 >= 0 && beta2 < 1, "beta2 must be in [0, 1)");
    require(std::isfinite(eps) && eps > 0, "eps must be finite and > 0");
    require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay must be finite and >= 0");
  }
};

/// One parameter's AdamW step at step `step` (1 for the first) with the gradient already
/// unscaled; T is float (what a GPU step keeps) or double (the FP64 reference). Throws
/// invalid_argument for a step under 1.
template <class T>
void adamw_update_reference(T& param, T gradient, T& first_moment, T& second_moment, std::int64_t step,
                            const adamw_options& o) {
  if (step < 1) throw invalid_argument("adamw_update_reference: step must be 1 or more, got " + std::to_string(step));
  const T lr = T(o.learning_rate), beta1 = T(o.beta1), beta2 = T(o.beta2);
  param *= T(1) - lr * T(o.weight_decay);
  first_moment = beta1 * first_moment + (T(1) - beta1) * gradient;
  second_moment = beta2 * second_moment + (T(1) - beta2) * gradient * gradient;
  const T correction1 = T(1) - T(std::pow(o.beta1, double(step))), correction2 = T(1) - T(std::pow(o.beta2, double(step)));
  param -= lr / correction1 * first_moment / (std::sqrt(second_moment) / std::sqrt(correction2) + T(o.eps));
}

}  // namespace gpucmp
