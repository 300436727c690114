// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Dynamic loss scaling on the device (the state machine of training/loss_scale.hpp): the
// scale, the growth tracker and the step counts live in device memory, the gradient check
// and the update are kernels, so a training step with loss scaling needs no host
// synchronisation and can be captured whole into a CUDA graph. In a step, in stream order:
// the loss is multiplied by scale(); after the backward pass check() flags any non-finite
// gradient; the optimizer reads skip_step() and scale() (a flagged step changes no weight;
// otherwise gradients are divided by the scale); then update() advances the state machine
// and clears the flag for the next step.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/training/loss_scale.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpucmp {

namespace detail {

/// The device copy of the state, with the step's flag. One allocation, so one copy reads it.
struct device_loss_scale {
  float scale;
  std::int32_t growth_tracker;
  std::int64_t steps;
  std::int64_t skipped_steps;
  std::int32_t found_non_finite;  ///< set by check() during a step, cleared by update()
};

__device__ inline float gradient_value(float v) { return v; }
__device__ inline float gradient_value(__half v) { return __half2float(v); }
__device__ inline float gradient_value(__nv_bfloat16 v) { return __bfloat162float(v); }

// Flags the step when any of the n gradients is infinite or NaN. Every thread that finds
// one writes the same 1, so no atomic is needed.
template <class T>
__global__ void flag_non_finite(const T* gradients, std::size_t n, device_loss_scale* state) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    if (!isfinite(gradient_value(gradients[i]))) state->found_non_finite = 1;
  }
}

// One step of the state machine (update_loss_scale in loss_scale.hpp), by one thread.
template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void advance_loss_scale(device_loss_scale* s, float growth_factor, float backoff_factor,
                                   std::int32_t growth_interval) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  ++s->steps;
  if (s->found_non_finite != 0) {
    s->scale = s->scale * backoff_factor;
    s->growth_tracker = 0;
    ++s->skipped_steps;
  } else {
    const std::int32_t clean = s->growth_tracker + 1;
    if (clean == growth_interval) {
      const float grown = s->scale * growth_factor;
      if (isfinite(grown)) s->scale = grown;
      s->growth_tracker = 0;
    } else {
      s->growth_tracker = clean;
    }
  }
  s->found_non_finite = 0;
}

}  // namespace detail

/// Dynamic loss scaling whose state lives on the current device. Owns that state (one small
/// allocation); every method that takes a stream only enqueues work on it, except read().
class dynamic_loss_scale {
 public:
  /// The state before the first step, written on `stream`. Throws invalid_argument for bad
  /// options.
  explicit dynamic_loss_scale(const loss_scale_options& options = {}, cudaStream_t stream = nullptr)
      : m_options(options), m_state(sizeof(detail::device_loss_scale), initial_fill::uninitialized()) {
    reset(stream);
  }

  /// Back to the options' initial scale and zero counts.
  void reset(cudaStream_t stream) {
    const loss_scale_state s = initial_loss_scale(m_options);
    const detail::device_loss_scale initial{s.scale, 0, 0, 0, 0};
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(state(), &initial, sizeof initial, cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `initial` is a local
  }

  /// The current scale, on the device: what the loss is multiplied by.
  const float* scale() const noexcept { return &state()->scale; }
  /// 1 on the device while the current step has a non-finite gradient (set by check()); the
  /// optimizer skips its update then.
  const std::int32_t* skip_step() const noexcept { return &state()->found_non_finite; }

  /// Flags the current step when any of `count` gradients at `gradients` is infinite or
  /// NaN. FP32, FP16 and BF16 gradients.
  template <class T>
  void check(const T* gradients, std::size_t count, cudaStream_t stream) {
    if (count == 0) return;
    const std::size_t blocks = std::min<std::size_t>((count + 255) / 256, 1024);
    detail::flag_non_finite<T><<<unsigned(blocks), 256, 0, stream>>>(gradients, count, state());
    GPUCMP_CUDA_CHECK_LAST("flag_non_finite");
  }

  /// Closes the step: backs off and counts it as skipped when it was flagged, else counts a
  /// clean step and grows the scale every growth_interval of them; clears the flag.
  void update(cudaStream_t stream) {
    detail::advance_loss_scale<><<<1, 1, 0, stream>>>(state(), m_options.growth_factor, m_options.backoff_factor,
                                                    m_options.growth_interval);
    GPUCMP_CUDA_CHECK_LAST("advance_loss_scale");
  }

  /// The state as it is after the work queued on `stream` (synchronizes `stream`).
  loss_scale_state read(cudaStream_t stream) const {
    detail::device_loss_scale d{};
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(&d, state(), sizeof d, cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    loss_scale_state s;
    s.scale = d.scale;
    s.growth_tracker = d.growth_tracker;
    s.steps = d.steps;
    s.skipped_steps = d.skipped_steps;
    return s;
  }

  /// The options it runs with.
  const loss_scale_options& options() const noexcept { return m_options; }

 private:
  detail::device_loss_scale* state() const noexcept {
    return reinterpret_cast<detail::device_loss_scale*>(const_cast<unsigned char*>(m_state.data()));
  }

  loss_scale_options m_options;
  device_buffer<unsigned char> m_state;  // one detail::device_loss_scale
};

}  // namespace gpucmp
