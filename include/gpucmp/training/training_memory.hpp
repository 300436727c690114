// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How much device memory one training step of a network needs at a batch size, before
// anything is allocated, as numbers a report can print:
//   - parameters: FP32 master weights (convolution filters, batch norms' gamma and beta, the
//     linear layers), the low-precision copy the passes read (FP16 / BF16 only), FP32
//     momentum, gradients (filters' in the activations' type, the rest FP32), and each batch
//     norm's running and saved statistics;
//   - activations kept for the backward pass: every layer's output and every convolution's
//     output before its batch norm (the batch norm's input), the images and the logits, and
//     max pooling's winners (one byte per output);
//   - activation gradients: one buffer per tensor while its gradient is live (from the first
//     layer whose backward pass writes it to the layer that produced the tensor), buffers
//     reused greedily as in models/network_memory.hpp; plus two scratch tensors, one for a
//     convolution's output gradient (the batch norm's backward writes it) and one for a
//     later part of a tensor's gradient that is not added in place (plan_gradient_parts:
//     with accumulate_in_conv, a convolution's data gradient adds its part itself, so
//     ResNet needs none);
//   - the loss: labels, per-row losses;
//   - a workspace reserve (the algorithms' real workspaces are known after their search).
// training_network (training/training_network.cuh) allocates this plan; the largest batch
// that fits is searched on it. Host-only.
#pragma once

#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// Where each tensor of a training step lives and what every part takes, in bytes.
struct training_memory_plan {
  // Parameters and optimizer state.
  std::int64_t parameter_count = 0;     ///< learned values (filters, gamma, beta, linear weights and biases)
  std::size_t master_bytes = 0;         ///< FP32 master weights
  std::size_t model_copy_bytes = 0;     ///< FP16 / BF16 copies of filters and linear weights (0 in FP32 / TF32)
  std::size_t momentum_bytes = 0;       ///< FP32 momentum
  std::size_t gradient_bytes = 0;       ///< parameter gradients
  std::size_t statistics_bytes = 0;     ///< running mean and variance, saved mean and 1/std: 4 FP32 per channel
  // Activations.
  std::vector<std::size_t> kept_bytes;  ///< tensor id -> bytes kept for the backward pass
  std::vector<std::size_t> conv_output_bytes;  ///< layer index -> its convolution's output before batch norm (0: not a conv)
  std::size_t pool_index_bytes = 0;     ///< max pooling's argmax, one byte per output
  std::size_t activation_bytes = 0;     ///< sum of the three above
  // Activation gradients.
  std::vector<std::size_t> gradient_slot_of;    ///< tensor id -> gradient buffer (SIZE_MAX: no gradient, the images)
  std::vector<std::size_t> gradient_slot_bytes; ///< gradient buffer -> bytes
  std::size_t activation_gradient_bytes = 0;    ///< sum of the gradient buffers
  std::size_t activation_gradient_bytes_without_reuse = 0;  ///< one buffer per tensor, for comparison
  std::size_t conv_gradient_scratch_bytes = 0;  ///< the largest convolution output
  std::size_t accumulate_scratch_bytes = 0;     ///< the largest tensor whose later gradient part goes through it (0: none)
  // The loss and the rest.
  std::size_t loss_bytes = 0;           ///< labels, per-row losses, the loss
  std::size_t workspace_reserve = 0;    ///< assumed algorithm workspace

  /// Parameters, optimizer state and statistics.
  std::size_t parameter_state_bytes() const noexcept {
    return master_bytes + model_copy_bytes + momentum_bytes + gradient_bytes + statistics_bytes;
  }
  /// Activation gradients and both scratch tensors.
  std::size_t gradient_buffer_bytes() const noexcept {
    return activation_gradient_bytes + conv_gradient_scratch_bytes + accumulate_scratch_bytes;
  }
  /// Everything.
  std::size_t total() const noexcept {
    return parameter_state_bytes() + activation_bytes + gradient_buffer_bytes() + loss_bytes + workspace_reserve;
  }
};

/// Workspace assumed before the algorithms are searched: three passes per convolution shape
/// share one buffer per layer in the network, cuBLASLt's 32 MiB, cuDNN batch norms' masks.
inline constexpr std::size_t training_workspace_reserve = std::size_t{256} << 20;

namespace detail {
inline std::size_t round_up_256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The tensor the loss reads: the last linear layer's output (a final softmax is left out of
// training: the loss takes the logits).
inline tensor_ref training_logits(const network_definition& def) {
  const auto& layers = def.layers();
  if (layers.empty()) throw invalid_argument(def.name() + ": a training step needs layers");
  const layer_definition& last = layers.back().kind == layer_kind::softmax && layers.size() > 1 ? layers[layers.size() - 2] : layers.back();
  if (last.kind != layer_kind::linear) {
    throw invalid_argument(def.name() + ": a training step needs a linear layer last (the loss reads its logits), not " +
                           std::string(to_string(last.kind)) + " '" + last.name + "'");
  }
  return last.output;
}
}  // namespace detail

/// How the backward pass adds up the gradient of a tensor that several layers read, in the
/// order it runs (last layer first; a convolution's residual part, from its batch norm, before
/// its input's, from its data-gradient pass). The first part is written where the gradient
/// lives. A later part from a data-gradient pass adds itself there (cuDNN's beta = 1) when
/// `accumulate_in_conv`; any other later part goes through the accumulate scratch, and when it
/// is the last and comes from the layer right after the convolution that produced the
/// tensor, that convolution's batch norm may read both parts (batch_norm_tensors::dy2)
/// instead of a separate addition. training_network builds its steps by this plan.
struct gradient_parts_plan {
  std::vector<bool> data_gradient_adds;    ///< layer -> its data-gradient pass adds its part in place
  std::vector<bool> batch_norm_reads_two;  ///< conv layer -> its output's gradient may arrive in two parts
  std::vector<bool> uses_scratch;          ///< tensor id -> a later part of its gradient goes through the scratch
};

/// The plan above for `def`'s layers up to the logits.
inline gradient_parts_plan plan_gradient_parts(const network_definition& def, bool accumulate_in_conv) {
  const auto& layers = def.layers();
  const std::size_t trained = std::size_t(detail::training_logits(def).id);
  gradient_parts_plan plan;
  plan.data_gradient_adds.assign(trained, false);
  plan.batch_norm_reads_two.assign(trained, false);
  plan.uses_scratch.assign(trained + 1, false);
  std::vector<bool> written(trained + 1, false);
  written[trained] = true;  // the logits' gradient: the loss writes it
  for (std::size_t k = trained; k-- > 0;) {
    const layer_definition& l = layers[k];
    struct part {
      tensor_ref tensor;
      bool data_gradient;  // a convolution's data-gradient pass writes it
    };
    std::vector<part> reads;
    if (l.kind == layer_kind::conv && l.residual.valid()) reads.push_back({l.residual, false});
    if (l.input.id != def.input().id) reads.push_back({l.input, l.kind == layer_kind::conv});
    for (std::size_t r = 0; r < reads.size(); ++r) {
      const std::size_t t = std::size_t(reads[r].tensor.id);
      if (!written[t]) {
        written[t] = true;
        continue;
      }
      if (reads[r].data_gradient && accumulate_in_conv) {
        plan.data_gradient_adds[k] = true;
        continue;
      }
      plan.uses_scratch[t] = true;
      const bool last = r + 1 == reads.size(), next_back_produced_it = t == k && k > 0;
      if (last && next_back_produced_it && layers[k - 1].kind == layer_kind::conv) plan.batch_norm_reads_two[k - 1] = true;
    }
  }
  return plan;
}

/// The memory plan of one training step of `def` at `batch` in `dtype` (header comment), its
/// gradient parts added as training_options::accumulate_in_conv says.
/// Throws invalid_argument when `def` cannot train: no linear layer last, a softmax that is
/// not the last layer.
inline training_memory_plan plan_training_memory(const network_definition& def, std::int64_t batch, numerics dtype,
                                                 bool accumulate_in_conv = true) {
  if (batch <= 0) throw invalid_argument(def.name() + ": batch must be positive");
  training_memory_plan plan;
  const auto& layers = def.layers();
  const tensor_ref logits = detail::training_logits(def);
  const std::size_t trained_layers = std::size_t(logits.id);  // layers 0 .. logits.id - 1
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    if (layers[i].kind == layer_kind::softmax) throw invalid_argument(def.name() + ": softmax '" + layers[i].name + "' must be last");
  }
  const bool low_precision = dtype == numerics::fp16 || dtype == numerics::bf16;
  const std::size_t e = activation_bytes(dtype);

  // Parameters: a convolution's filter and its batch norm's gamma and beta (its folded bias
  // becomes beta); a linear layer's weight and bias.
  for (std::size_t i = 0; i < trained_layers; ++i) {
    const layer_definition& l = layers[i];
    if (l.kind == layer_kind::conv) {
      const std::size_t filter = l.weight.size(), channels = std::size_t(l.conv.out_channels);
      plan.parameter_count += std::int64_t(filter + 2 * channels);
      plan.master_bytes += 4 * (filter + 2 * channels);
      if (low_precision) plan.model_copy_bytes += e * filter;
      plan.gradient_bytes += e * filter + 4 * 2 * channels;
      plan.statistics_bytes += 4 * 4 * channels;
    } else if (l.kind == layer_kind::linear) {
      const std::size_t weight = l.weight.size(), bias = l.bias.size();
      plan.parameter_count += std::int64_t(weight + bias);
      plan.master_bytes += 4 * (weight + bias);
      if (low_precision) plan.model_copy_bytes += e * weight;
      plan.gradient_bytes += 4 * (weight + bias);
    }
  }
  plan.momentum_bytes = plan.master_bytes;

  // Activations kept: every tensor up to the logits, and every convolution's output before
  // its batch norm.
  const std::size_t tensors = trained_layers + 1;
  plan.kept_bytes.assign(tensors, 0);
  plan.conv_output_bytes.assign(trained_layers, 0);
  for (std::size_t t = 0; t < tensors; ++t) {
    plan.kept_bytes[t] = detail::round_up_256(tensor_bytes(def, {int(t)}, batch, dtype));
    plan.activation_bytes += plan.kept_bytes[t];
  }
  for (std::size_t i = 0; i < trained_layers; ++i) {
    if (layers[i].kind != layer_kind::conv) continue;
    plan.conv_output_bytes[i] = plan.kept_bytes[std::size_t(layers[i].output.id)];
    plan.activation_bytes += plan.conv_output_bytes[i];
    plan.conv_gradient_scratch_bytes = std::max(plan.conv_gradient_scratch_bytes, plan.conv_output_bytes[i]);
  }
  for (std::size_t i = 0; i < trained_layers; ++i) {
    if (layers[i].kind != layer_kind::max_pool) continue;
    const std::size_t bytes = detail::round_up_256(std::size_t(batch * def.shape(layers[i].output).elements()));
    plan.pool_index_bytes += bytes;
    plan.activation_bytes += bytes;
  }

  // Activation gradients. Backward step s runs layer trained_layers - 1 - s. A tensor's
  // gradient is written first by its last reader's backward (the loss writes the logits')
  // and read last by its producer's backward; the images have none.
  std::vector<std::size_t> readers(tensors, 0), last_reader(tensors, 0);
  for (std::size_t i = 0; i < trained_layers; ++i) {
    for (tensor_ref r : {layers[i].input, layers[i].residual}) {
      if (!r.valid()) continue;
      ++readers[std::size_t(r.id)];
      last_reader[std::size_t(r.id)] = std::max(last_reader[std::size_t(r.id)], i);
    }
  }
  const gradient_parts_plan parts = plan_gradient_parts(def, accumulate_in_conv);
  for (std::size_t t = 1; t < tensors; ++t) {
    if (parts.uses_scratch[t]) plan.accumulate_scratch_bytes = std::max(plan.accumulate_scratch_bytes, plan.kept_bytes[t]);
  }
  const std::size_t steps = trained_layers;
  auto first_step = [&](std::size_t t) { return t == tensors - 1 ? std::size_t{0} : steps - 1 - last_reader[t]; };
  auto last_step = [&](std::size_t t) { return steps - 1 - (t - 1); };  // its producer, layer t - 1
  plan.gradient_slot_of.assign(tensors, SIZE_MAX);
  std::vector<bool> slot_free;
  for (std::size_t s = 0; s < steps; ++s) {
    // Gradients first written at step s get a buffer (detail::take_buffer, inference's rule),
    // before those last read at s are freed: a layer's input gradient never aliases its
    // output gradient.
    for (std::size_t t = tensors - 1; t >= 1; --t) {
      if (readers[t] == 0 && t != tensors - 1) continue;  // nothing reads it: no gradient
      if (first_step(t) != s) continue;
      const std::size_t need = plan.kept_bytes[t];
      plan.activation_gradient_bytes_without_reuse += need;
      plan.gradient_slot_of[t] = detail::take_buffer(plan.gradient_slot_bytes, slot_free, need);
    }
    for (std::size_t t = 1; t < tensors; ++t) {
      if (plan.gradient_slot_of[t] != SIZE_MAX && last_step(t) == s) slot_free[plan.gradient_slot_of[t]] = true;
    }
  }
  for (std::size_t b : plan.gradient_slot_bytes) plan.activation_gradient_bytes += b;

  plan.loss_bytes = detail::round_up_256(std::size_t(batch) * (sizeof(std::int32_t) + sizeof(double))) + 256;
  plan.workspace_reserve = training_workspace_reserve;
  return plan;
}

/// The largest batch whose training plan fits in `free_bytes`; 0 when not even one image does.
inline std::int64_t largest_training_batch_that_fits(const network_definition& def, numerics dtype, std::size_t free_bytes,
                                                     bool accumulate_in_conv = true) {
  return detail::largest_fitting_batch(
      [&](std::int64_t b) { return plan_training_memory(def, b, dtype, accumulate_in_conv).total() <= free_bytes; });
}

}  // namespace gpucmp
