// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The images a calibration and an accuracy check run on where no dataset is given: random
// but not i.i.d. pixels, so that a network's pooled features differ from image to image.
// Host-only.
#pragma once

#include <gpucmp/cuda/random.hpp>
#include <gpucmp/models/network_definition.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace gpucmp {

/// Images `first` .. `first + count - 1` of a calibration set: count x C x H x W FP32 in
/// torch's NCHW order.
using calibration_images = std::function<std::vector<float>(std::int64_t first, std::int64_t count)>;

/// The calibration set calibration_settings describes: image i drawn from random stream
/// `seed` at its own offset (so a batch split draws the same images). Each channel is a colour
/// offset in [-1, 1], a plane wave of amplitude up to 1.5, random phase and 0.5 to 4.5 periods
/// across and down, and uniform noise of up to +-1: within +-3.5, about the
/// spread of ImageNet pixels once normalized. Not i.i.d. pixels: those average out in a
/// network's pooled features, so every image looks the same to it and a random-weight
/// ResNet-50 gives all of them one class (lab/probes/random_model_agreement.cu).
inline calibration_images random_calibration_images(const image_shape& shape, std::uint64_t seed) {
  return [shape, seed](std::int64_t first, std::int64_t count) {
    std::vector<float> out(std::size_t(count * shape.elements()));
    generate_random<float>(out.data(), out.size(), seed, std::uint64_t(first * shape.elements()), value_range<float>{-1.0, 1.0});
    const double two_pi = 6.283185307179586;
    std::vector<double> sin_x(std::size_t(shape.w)), cos_x(std::size_t(shape.w));
    for (std::int64_t i = 0; i < count; ++i) {
      for (std::int64_t c = 0; c < shape.c; ++c) {
        // This image and channel's own draws, from a stream apart from the noise's.
        const std::uint64_t at = std::uint64_t((first + i) * shape.c + c) * 8;
        auto draw = [&](int j) { return unit_interval(random_bits(seed * 31 + 17, at + std::uint64_t(j))); };
        const double offset = 2 * draw(0) - 1, amplitude = 1.5 * draw(1), noise = 0.3 + 0.7 * draw(2), phase = two_pi * draw(5);
        const double fx = two_pi * (0.5 + 4 * draw(3)) / double(shape.w), fy = two_pi * (0.5 + 4 * draw(4)) / double(shape.h);
        // sin(fx x + fy y + phase) = sin(fx x) cos(fy y + phase) + cos(fx x) sin(fy y + phase)
        for (std::int64_t x = 0; x < shape.w; ++x) {
          sin_x[std::size_t(x)] = std::sin(fx * double(x));
          cos_x[std::size_t(x)] = std::cos(fx * double(x));
        }
        float* plane = out.data() + std::size_t((i * shape.c + c) * shape.h * shape.w);
        for (std::int64_t y = 0; y < shape.h; ++y) {
          const double sy = amplitude * std::sin(fy * double(y) + phase), cy = amplitude * std::cos(fy * double(y) + phase);
          float* row = plane + y * shape.w;
          for (std::int64_t x = 0; x < shape.w; ++x) {
            row[x] = float(offset + sin_x[std::size_t(x)] * cy + cos_x[std::size_t(x)] * sy + noise * double(row[x]));
          }
        }
      }
    }
    return out;
  };
}

}  // namespace gpucmp
