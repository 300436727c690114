// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where a network loses accuracy: its activations beside a reference network's (the same
// definition in FP32), layer by layer on the same images, as a layer-wise comparison tool
// (TensorRT's Polygraphy, PyTorch's numeric suite) shows it. The logits say how far a
// quantized network ends up; this says which layers took it there. Each layer's output gets
// three figures:
// - relative RMS error: rms(got - reference) / rms(reference);
// - error against variation: rms(got - reference) / rms(reference - its mean over the images
//   at that position), the error beside what tells the images apart. Random weights give
//   every image nearly the same pooled features and logits, so a small relative error can
//   still swap the top-1 class; this figure shows it (logits_agreement.hpp's centred measure,
//   layer by layer);
// - largest relative error: max |got - reference| / max |reference|.
// Errors accumulate: each row is the drift of everything up to that layer. The comparison is
// host-only; layer_errors() drives any two networks that run a definition layer by layer
// (models/network.cuh, models/quantized_network.cuh).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/network_definition.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// One tensor beside its reference (this header's opening comment).
struct activation_error {
  double relative_rms = 0;           ///< rms(got - reference) / rms(reference)
  double relative_to_variation = 0;  ///< rms(got - reference) / rms(reference - its mean over the images)
  double max_relative = 0;           ///< max |got - reference| / max |reference|
};

/// Compares `got` with `reference`, each `images` equal slices (one per image) in the same
/// order. A zero denominator gives 0 where the error is 0 too, infinity otherwise. Throws
/// invalid_argument for fewer than two images (one has no variation), sizes that differ or do
/// not split into `images`, and a value that is not finite (naming the image and position).
inline activation_error compare_activations(const std::vector<float>& reference, const std::vector<float>& got,
                                            std::int64_t images) {
  if (images < 2 || got.size() != reference.size() || reference.empty() || reference.size() % std::size_t(images) != 0) {
    throw invalid_argument("compare_activations: " + std::to_string(got.size()) + " values against " +
                           std::to_string(reference.size()) + " in " + std::to_string(images) +
                           " images (at least two, equal slices)");
  }
  const std::size_t per_image = reference.size() / std::size_t(images);
  std::vector<double> mean(per_image, 0.0);  // the reference's mean over the images, position by position
  for (std::size_t at = 0; at < reference.size(); ++at) {
    if (!std::isfinite(reference[at]) || !std::isfinite(got[at])) {
      throw invalid_argument("compare_activations: image " + std::to_string(at / per_image) + ", position " +
                             std::to_string(at % per_image) + " is not finite (reference " +
                             std::to_string(reference[at]) + ", got " + std::to_string(got[at]) + ")");
    }
    mean[at % per_image] += double(reference[at]) / double(images);
  }
  double error_squares = 0, reference_squares = 0, variation_squares = 0, worst = 0, largest = 0;
  for (std::size_t at = 0; at < reference.size(); ++at) {
    const double r = reference[at], e = double(got[at]) - r, v = r - mean[at % per_image];
    error_squares += e * e;
    reference_squares += r * r;
    variation_squares += v * v;
    worst = std::max(worst, std::fabs(e));
    largest = std::max(largest, std::fabs(r));
  }
  const auto ratio = [](double num, double den) { return den > 0 ? num / den : (num > 0 ? INFINITY : 0.0); };
  activation_error a;
  a.relative_rms = ratio(std::sqrt(error_squares), std::sqrt(reference_squares));
  a.relative_to_variation = ratio(std::sqrt(error_squares), std::sqrt(variation_squares));
  a.max_relative = ratio(worst, largest);
  return a;
}

/// One layer's output beside the reference's.
struct layer_error {
  std::string layer;  ///< the definition's layer name
  std::string kind;   ///< "conv", "max_pool", ...
  activation_error error;
};

/// Each layer's output in `net` beside `reference`'s on the same `images` (count x C x H x W
/// FP32 in torch's NCHW order, at least two and at most either network's batch; the rest of a
/// batch is zeros and not compared), layer by layer in execution order. Both run the same
/// definition and have run_layer(i, stream), set_input(images, stream),
/// activation_values(tensor, stream) (NHWC FP32, the whole batch), options().batch and
/// definition(). Runs both networks' layers once; throws invalid_argument for definitions that
/// differ (name, layers, shapes) or an image count out of range.
template <class Reference, class Network>
std::vector<layer_error> layer_errors(Reference& reference, Network& net, const std::vector<float>& images,
                                      cudaStream_t stream) {
  const network_definition& def = reference.definition();
  const network_definition& other = net.definition();
  bool same = def.name() == other.name() && def.layers().size() == other.layers().size();
  for (std::size_t i = 0; same && i < def.layers().size(); ++i) {
    const layer_definition &a = def.layers()[i], &b = other.layers()[i];
    same = a.name == b.name && a.kind == b.kind && def.shape(a.output) == other.shape(b.output);
  }
  if (!same) {
    throw invalid_argument("layer_errors: the network runs another definition than the reference's (" + other.name() + ", " +
                           std::to_string(other.layers().size()) + " layers, against " + def.name() + ", " +
                           std::to_string(def.layers().size()) + " layers)");
  }
  const std::int64_t per_image = def.shape(def.input()).elements();
  const std::int64_t count = std::int64_t(images.size()) / per_image;
  if (count < 2 || std::int64_t(images.size()) != count * per_image || count > reference.options().batch ||
      count > net.options().batch) {
    throw invalid_argument("layer_errors: " + std::to_string(images.size()) + " values are not between 2 and " +
                           std::to_string(std::min(reference.options().batch, net.options().batch)) + " images of " +
                           std::to_string(per_image) + " values");
  }
  const auto padded = [&](std::int64_t batch) {
    std::vector<float> in = images;
    in.resize(std::size_t(batch * per_image), 0.0f);
    return in;
  };
  reference.set_input(padded(reference.options().batch), stream);
  net.set_input(padded(net.options().batch), stream);
  std::vector<layer_error> rows;
  for (std::size_t i = 0; i < def.layers().size(); ++i) {
    const layer_definition& l = def.layers()[i];
    reference.run_layer(i, stream);
    net.run_layer(i, stream);
    // Read right after the layer: a network may reuse a buffer once its tensor is dead.
    const std::size_t compared = std::size_t(count * def.shape(l.output).elements());
    std::vector<float> expected = reference.activation_values(l.output, stream);
    std::vector<float> got = net.activation_values(l.output, stream);
    expected.resize(compared);
    got.resize(compared);
    rows.push_back({l.name, to_string(l.kind), compare_activations(expected, got, count)});
  }
  return rows;
}

}  // namespace gpucmp
