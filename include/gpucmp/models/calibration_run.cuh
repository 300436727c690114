// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A calibration made: the network run in FP32, layer by layer, over the calibration images,
// each stored tensor's |x| counted on the GPU as its layer writes it
// (models/activation_counts.cuh), and each range chosen by the settings' method
// (models/calibration.hpp). The table names the model and a fingerprint of its weights, so a
// file written from it is refused for other weights. Components gpucmp::cudnn and
// gpucmp::cublas (the FP32 network).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/models/activation_counts.cuh>
#include <gpucmp/models/calibration_images.hpp>
#include <gpucmp/models/calibration.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/quantization_plan.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// A fingerprint of the definition's parameters (every layer's weight and bias, in order),
/// as a calibration names the weights it was made with.
inline std::string definition_fingerprint(const network_definition& def) {
  std::vector<std::vector<float>> parameters;
  for (const layer_definition& l : def.layers()) {
    parameters.push_back(l.weight);
    parameters.push_back(l.bias);
  }
  return weights_fingerprint(parameters);
}

/// Calibrates `def`: an FP32 network of `batch` images (NCHW, as gpucmp's FP32 networks run)
/// over settings.images images from `images` (by default random_calibration_images of
/// settings.seed), counting every tensor calibration_tensors() names on the GPU. The last
/// batch may be partial: only its first images are counted. Throws invalid_argument for
/// settings that ask for no images or a bad batch, what building the network throws, and
/// invalid_argument naming a tensor whose values were not finite.
inline calibration_table calibrate(const network_definition& def, const calibration_settings& settings, std::int64_t batch,
                                   cudaStream_t stream, calibration_images images = {}) {
  if (settings.images <= 0) throw invalid_argument(def.name() + ": a calibration needs at least one image");
  if (batch <= 0) throw invalid_argument(def.name() + ": the calibration batch must be positive");
  if (!images) images = random_calibration_images(def.shape(def.input()), settings.seed);
  network_options options;
  options.batch = std::min(batch, settings.images);
  options.dtype = numerics::fp32;
  options.layout = conv_layout::nchw;
  network net(def, options, stream);
  const std::vector<std::string> names = calibration_tensors(def);
  std::map<std::string, std::unique_ptr<activation_counter>> counters;
  for (const std::string& name : names) counters[name] = std::make_unique<activation_counter>(stream);
  auto count = [&](const std::string& name, tensor_ref t, std::int64_t valid_images) {
    const auto found = counters.find(name);
    if (found == counters.end()) return;
    found->second->add(static_cast<const float*>(net.activation_data(t)), std::size_t(valid_images * def.shape(t).elements()),
                       stream);
  };
  for (std::int64_t first = 0; first < settings.images; first += options.batch) {
    const std::int64_t valid = std::min(options.batch, settings.images - first);
    std::vector<float> batch_images = images(first, valid);
    batch_images.resize(std::size_t(options.batch * def.shape(def.input()).elements()), 0.0f);  // a partial batch's rest
    net.set_input(batch_images, stream);
    count("input", def.input(), valid);
    for (std::size_t i = 0; i < def.layers().size(); ++i) {
      net.run_layer(i, stream);
      count(def.layers()[i].name, def.layers()[i].output, valid);
    }
  }
  calibration_table table;
  table.model = def.name();
  table.weights = definition_fingerprint(def);
  table.settings = settings;
  // In the network's order, so that a broken run is reported at the first tensor it broke.
  for (const std::string& name : names) table.ranges[name] = counters.at(name)->range(name, stream).range(settings);
  return table;
}

}  // namespace gpucmp
