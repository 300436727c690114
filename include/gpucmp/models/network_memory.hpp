// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How much device memory a network needs at a batch size, before anything is allocated:
// parameters, plus activations placed in reusable buffers (a tensor's buffer is free after
// the last layer that reads it; the input and the output are never reused, so a forward pass
// can run again), plus a workspace reserve. gpucmp::network allocates exactly this plan, and
// largest_batch_that_fits() searches it. Host-only.
#pragma once

#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpucmp {

/// Where each tensor of a network lives and how much memory that takes.
struct network_memory_plan {
  std::vector<std::size_t> slot_of;     ///< tensor id -> buffer index
  std::vector<std::size_t> slot_bytes;  ///< buffer index -> bytes
  std::size_t activation_bytes = 0;     ///< sum of the buffers
  std::size_t activation_bytes_without_reuse = 0;  ///< one buffer per tensor, for comparison
  std::size_t parameter_bytes = 0;      ///< weights and biases in the network's types

  /// Everything, with `workspace_bytes` of algorithm workspace.
  std::size_t total(std::size_t workspace_bytes) const noexcept { return activation_bytes + parameter_bytes + workspace_bytes; }
};

/// Workspace assumed by fit checks before the algorithms are known: cuBLASLt's 32 MiB, and
/// room for what the chosen convolutions use (docs/models.md, "How a network runs").
inline constexpr std::size_t network_workspace_reserve = std::size_t{64} << 20;

/// Bytes of one element of tensor `t` (FP32 after a linear layer, else the network's type).
inline std::size_t tensor_element_bytes(const network_definition& def, tensor_ref t, numerics dtype) {
  return def.float_from(t) ? sizeof(float) : activation_bytes(dtype);
}

/// Bytes of tensor `t` at `batch`.
inline std::size_t tensor_bytes(const network_definition& def, tensor_ref t, std::int64_t batch, numerics dtype) {
  return std::size_t(batch * def.shape(t).elements()) * tensor_element_bytes(def, t, dtype);
}

namespace detail {
// Greedy reuse: the smallest free buffer that fits `need`, else the largest free one grown to
// it, else a new one. Returns its index, now taken.
inline std::size_t take_buffer(std::vector<std::size_t>& buffer_bytes, std::vector<bool>& buffer_free, std::size_t need) {
  std::size_t best = SIZE_MAX;
  for (std::size_t s = 0; s < buffer_bytes.size(); ++s) {
    if (!buffer_free[s]) continue;
    if (best == SIZE_MAX) {
      best = s;
      continue;
    }
    const bool fits = buffer_bytes[s] >= need, best_fits = buffer_bytes[best] >= need;
    const bool tighter = fits && (!best_fits || buffer_bytes[s] < buffer_bytes[best]);
    const bool larger = !fits && !best_fits && buffer_bytes[s] > buffer_bytes[best];
    if (tighter || larger) best = s;
  }
  if (best == SIZE_MAX) {
    best = buffer_bytes.size();
    buffer_bytes.push_back(0);
    buffer_free.push_back(false);
  }
  buffer_bytes[best] = std::max(buffer_bytes[best], need);
  buffer_free[best] = false;
  return best;
}
}  // namespace detail

/// Greedy buffer reuse in execution order: each output takes the smallest free buffer that
/// fits, else grows the largest free one, else gets a new one (256-byte aligned sizes).
inline network_memory_plan plan_network_memory(const network_definition& def, std::int64_t batch, numerics dtype) {
  network_memory_plan plan;
  const auto& layers = def.layers();
  const std::size_t tensors = layers.size() + 1;
  std::vector<std::size_t> last_use(tensors, 0);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    last_use[std::size_t(layers[i].input.id)] = i;
    if (layers[i].residual.valid()) last_use[std::size_t(layers[i].residual.id)] = i;
  }
  last_use[0] = last_use[tensors - 1] = SIZE_MAX;  // input and output stay
  plan.slot_of.assign(tensors, 0);
  std::vector<bool> slot_free;
  auto place = [&](std::size_t t) {
    const std::size_t need = (tensor_bytes(def, {int(t)}, batch, dtype) + 255) / 256 * 256;
    plan.activation_bytes_without_reuse += need;
    plan.slot_of[t] = detail::take_buffer(plan.slot_bytes, slot_free, need);
  };
  place(0);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    place(std::size_t(layers[i].output.id));  // before freeing: an output never aliases its inputs
    for (tensor_ref read : {layers[i].input, layers[i].residual}) {
      if (read.valid() && last_use[std::size_t(read.id)] == i) slot_free[plan.slot_of[std::size_t(read.id)]] = true;
    }
  }
  for (std::size_t b : plan.slot_bytes) plan.activation_bytes += b;
  for (const auto& l : layers) {
    if (l.kind == layer_kind::conv) plan.parameter_bytes += (l.weight.size() + l.bias.size()) * activation_bytes(dtype);
    if (l.kind == layer_kind::linear) plan.parameter_bytes += l.weight.size() * activation_bytes(dtype) + l.bias.size() * sizeof(float);
  }
  return plan;
}

namespace detail {
// The largest batch b >= 1 with fits(b) (fits falls as b grows), by doubling then bisection;
// 0 when not even one image fits.
template <class Fits>
std::int64_t largest_fitting_batch(Fits&& fits) {
  if (!fits(1)) return 0;
  std::int64_t low = 1, high = 2;
  while (fits(high)) {
    low = high;
    high *= 2;
    if (high > (std::int64_t{1} << 40)) return low;
  }
  while (high - low > 1) {  // fits(low), !fits(high)
    const std::int64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}
}  // namespace detail

/// The largest batch whose plan (with network_workspace_reserve) fits in `free_bytes`; 0 when
/// not even one image does.
inline std::int64_t largest_batch_that_fits(const network_definition& def, numerics dtype, std::size_t free_bytes) {
  return detail::largest_fitting_batch(
      [&](std::int64_t b) { return plan_network_memory(def, b, dtype).total(network_workspace_reserve) <= free_bytes; });
}

}  // namespace gpucmp
