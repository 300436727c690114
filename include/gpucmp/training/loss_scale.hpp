// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Dynamic loss scaling for mixed-precision (FP16) training, as a state machine: the loss is
// multiplied by `scale` before the backward pass so small gradients survive FP16; when any
// gradient comes out infinite or NaN the step's update is skipped and the scale backs off;
// after `growth_interval` steps in a row without one it grows. The rule and its defaults
// are torch.cuda.amp.GradScaler's, so a gpucmp step and a PyTorch step skip the same steps.
// This header is the host reference and the options; training/loss_scale.cuh keeps the
// state on the device and updates it there, with no host synchronisation, so a whole
// training step fits in one CUDA graph. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace gpucmp {

/// Settings of dynamic loss scaling (GradScaler's defaults).
struct loss_scale_options {
  float initial_scale = 65536.0f;  ///< 2^16
  float growth_factor = 2.0f;      ///< the scale is multiplied by this after growth_interval clean steps
  float backoff_factor = 0.5f;     ///< and by this after a step with a non-finite gradient
  std::int32_t growth_interval = 2000;  ///< clean steps in a row before the scale grows

  /// Throws invalid_argument naming the first field that breaks its rule.
  void validate() const {
    auto require = [](bool ok, const char* what) {
      if (!ok) throw invalid_argument(std::string("loss_scale_options: ") + what);
    };
    require(std::isfinite(initial_scale) && initial_scale > 0, "initial_scale must be finite and > 0");
    require(std::isfinite(growth_factor) && growth_factor > 1, "growth_factor must be finite and > 1");
    require(std::isfinite(backoff_factor) && backoff_factor > 0 && backoff_factor < 1, "backoff_factor must be in (0, 1)");
    require(growth_interval >= 1, "growth_interval must be >= 1");
  }
};

/// The state dynamic loss scaling carries from step to step (on the device: loss_scale.cuh).
struct loss_scale_state {
  float scale = 65536.0f;          ///< what the loss is multiplied by
  std::int32_t growth_tracker = 0; ///< clean steps since the scale last changed
  std::int64_t steps = 0;          ///< steps seen
  std::int64_t skipped_steps = 0;  ///< steps whose update was skipped (a non-finite gradient)
};

/// The state before the first step.
inline loss_scale_state initial_loss_scale(const loss_scale_options& options) {
  options.validate();
  loss_scale_state s;
  s.scale = options.initial_scale;
  return s;
}

/// One step of the state machine, the reference the device update is tested against:
/// with a non-finite gradient the step is skipped and the scale backs off; otherwise the
/// tracker counts the clean step, and at growth_interval the scale grows (only to a finite
/// value, as GradScaler's) and the tracker restarts. Returns true when the step is skipped.
inline bool update_loss_scale(loss_scale_state& s, bool found_non_finite, const loss_scale_options& options) noexcept {
  ++s.steps;
  if (found_non_finite) {
    s.scale = s.scale * options.backoff_factor;
    s.growth_tracker = 0;
    ++s.skipped_steps;
    return true;
  }
  const std::int32_t clean = s.growth_tracker + 1;
  if (clean == options.growth_interval) {
    const float grown = s.scale * options.growth_factor;
    if (std::isfinite(grown)) s.scale = grown;
    s.growth_tracker = 0;
  } else {
    s.growth_tracker = clean;
  }
  return false;
}

}  // namespace gpucmp
