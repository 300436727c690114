// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A stride-2 convolution over few channels (a CNN's stem: ResNet-50's 7x7 over 3 channels) as
// a stride-1 convolution over a 2x2 space-to-depth image, the same sums exactly: each 2x2
// block of pixels becomes one pixel of 4C channels (padded to 16), and the filter's taps are
// regrouped the same way, with zero taps where the filter ends (7x7 becomes 4x4, 31 % more
// multiply-adds, all of them zeros). Tensor cores take 16 or 32 channels at a step: over 3
// channels cuDNN's INT8 stem ran 6x slower than FP16 on the H100
// (docs/results/h100-quantized.md), which left a quantized ResNet-50's stem in FP16.
//
// For a filter of r x s taps at padding pad (= 2m + off, off 0 or 1), output row p reads input
// rows 2p - pad + t, t < r. With t = 2u + dy that is row 2(p - m + u) + dy - off: image row
// a = p - m + u of the space-to-depth image X'(a, b, (dy, dx, c)) = x(2a + dy - off, 2b + dx -
// off, c), zero outside x, under a filter of ceil(r/2) taps, padding m and stride 1. Host only:
// a network writes the image as it quantizes its input (models/quantized_network.cuh).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// A stride-2 convolution and the stride-1 one on its space-to-depth image (the opening comment).
struct space_to_depth_conv {
  conv_problem original;     ///< NHWC, stride 2
  conv_problem transformed;  ///< the same sums: stride 1 over N x H' x W' x C'
  std::int64_t offset = 0;   ///< off: image row a, sub-row dy holds x's row 2a + dy - off

  /// Why `p` does not take this form ("" when it does): NHWC, stride 2 both ways, no dilation,
  /// one group, at most 4 channels (so that 4C fits 16).
  static std::string refusal(const conv_problem& p) {
    if (p.layout != conv_layout::nhwc) return "space-to-depth needs NHWC";
    if (p.stride_h != 2 || p.stride_w != 2) return "space-to-depth takes stride-2 convolutions";
    if (p.dilation_h != 1 || p.dilation_w != 1 || p.groups != 1) return "space-to-depth takes undilated, ungrouped convolutions";
    if (p.c > 4) return "space-to-depth regroups at most 4 channels (4C must fit 16)";
    return "";
  }

  /// `p` transformed; throws unsupported naming why it does not take this form.
  explicit space_to_depth_conv(const conv_problem& p) : original(p), transformed(p) {
    if (const std::string why = refusal(p); !why.empty()) throw unsupported(why + " (" + p.shape_name() + ")");
    p.validate_geometry();
    const std::int64_t m_h = p.pad_h / 2, m_w = p.pad_w / 2;
    offset = p.pad_h % 2;
    if (p.pad_w % 2 != offset) throw unsupported("space-to-depth needs the same padding parity both ways (" + p.shape_name() + ")");
    transformed.c = 16;
    transformed.r = (p.r + 1) / 2;
    transformed.s = (p.s + 1) / 2;
    transformed.pad_h = m_h;
    transformed.pad_w = m_w;
    transformed.stride_h = transformed.stride_w = 1;
    transformed.h = p.p() + transformed.r - 1 - 2 * m_h;
    transformed.w = p.q() + transformed.s - 1 - 2 * m_w;
  }

  /// K x R x S x C filters of 1-byte elements (INT8 or FP8; a zero byte is zero in both)
  /// regrouped into K x R' x S' x 16, zero where the filter has no tap.
  std::vector<std::uint8_t> transform_filters(const std::vector<std::uint8_t>& krsc) const {
    const conv_problem& p = original;
    const conv_problem& t = transformed;
    if (krsc.size() != std::size_t(p.k * p.r * p.s * p.c)) {
      throw invalid_argument("space_to_depth_conv: " + std::to_string(krsc.size()) + " filter bytes for " + p.shape_name());
    }
    std::vector<std::uint8_t> out(std::size_t(t.k * t.r * t.s * t.c), 0);
    for (std::int64_t k = 0; k < p.k; ++k) {
      for (std::int64_t r = 0; r < p.r; ++r) {
        for (std::int64_t s = 0; s < p.s; ++s) {
          for (std::int64_t c = 0; c < p.c; ++c) {
            const std::int64_t channel = ((r % 2) * 2 + s % 2) * p.c + c;
            out[std::size_t(((k * t.r + r / 2) * t.s + s / 2) * t.c + channel)] =
                krsc[std::size_t(((k * p.r + r) * p.s + s) * p.c + c)];
          }
        }
      }
    }
    return out;
  }
};

}  // namespace gpucmp
