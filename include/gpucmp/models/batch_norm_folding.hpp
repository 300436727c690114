// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Inference-time batch norm folded into the convolution before it: y = gamma (conv(x, w) -
// mean) / sqrt(var + eps) + beta equals conv(x, w') + b' with w' = w * s and b' = beta -
// mean * s, s = gamma / sqrt(var + eps) per output channel. Computed in double, stored as
// float. Also the filter layout change PyTorch (K, C, R, S) -> cuDNN NHWC (K, R, S, C).
// Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// One batch norm's inference parameters, per channel.
struct batch_norm_params {
  std::vector<float> gamma;         ///< weight
  std::vector<float> beta;          ///< bias
  std::vector<float> running_mean;  ///< running mean
  std::vector<float> running_var;   ///< running variance
  double epsilon = 1e-5;            ///< torch.nn.BatchNorm2d's default
};

/// A convolution with the batch norm folded in: filters in (K, C, R, S) order and a bias per K.
struct folded_conv {
  std::vector<float> weight;  ///< K * C * R * S values, (K, C, R, S) order
  std::vector<float> bias;    ///< K values
};

/// Folds `bn` into the filters `weight` of `k` output channels ((K, C, R, S) order).
/// Throws invalid_argument when the sizes disagree or a variance + eps is not positive.
inline folded_conv fold_batch_norm(const std::vector<float>& weight, std::int64_t k, const batch_norm_params& bn) {
  const std::size_t channels = static_cast<std::size_t>(k);
  if (k <= 0 || weight.size() % channels != 0) {
    throw invalid_argument("fold_batch_norm: " + std::to_string(weight.size()) + " filter values do not split into " +
                           std::to_string(k) + " output channels");
  }
  for (const auto* v : {&bn.gamma, &bn.beta, &bn.running_mean, &bn.running_var}) {
    if (v->size() != channels) {
      throw invalid_argument("fold_batch_norm: batch norm has " + std::to_string(v->size()) + " channels, the convolution " +
                             std::to_string(k));
    }
  }
  const std::size_t per_filter = weight.size() / channels;
  folded_conv out;
  out.weight.resize(weight.size());
  out.bias.resize(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    const double denominator = double(bn.running_var[c]) + bn.epsilon;
    if (!(denominator > 0)) {
      throw invalid_argument("fold_batch_norm: channel " + std::to_string(c) + " has running_var + eps <= 0");
    }
    const double scale = double(bn.gamma[c]) / std::sqrt(denominator);
    for (std::size_t i = 0; i < per_filter; ++i) out.weight[c * per_filter + i] = float(double(weight[c * per_filter + i]) * scale);
    out.bias[c] = float(double(bn.beta[c]) - double(bn.running_mean[c]) * scale);
  }
  return out;
}

/// Filters from PyTorch's (K, C, R, S) order to cuDNN NHWC's (K, R, S, C).
inline std::vector<float> kcrs_to_krsc(const std::vector<float>& w, std::int64_t k, std::int64_t c, std::int64_t r,
                                       std::int64_t s) {
  if (k <= 0 || c <= 0 || r <= 0 || s <= 0 || w.size() != std::size_t(k * c * r * s)) {
    throw invalid_argument("kcrs_to_krsc: " + std::to_string(w.size()) + " values for a " + std::to_string(k) + "x" +
                           std::to_string(c) + "x" + std::to_string(r) + "x" + std::to_string(s) + " filter");
  }
  std::vector<float> out(w.size());
  for (std::int64_t ki = 0; ki < k; ++ki)
    for (std::int64_t ci = 0; ci < c; ++ci)
      for (std::int64_t ri = 0; ri < r; ++ri)
        for (std::int64_t si = 0; si < s; ++si)
          out[std::size_t(((ki * r + ri) * s + si) * c + ci)] = w[std::size_t(((ki * c + ci) * r + ri) * s + si)];
  return out;
}

}  // namespace gpucmp
