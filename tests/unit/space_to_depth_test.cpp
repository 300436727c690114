// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A stride-2 convolution and the stride-1 one over its space-to-depth image give the same sums
// exactly, for the stem of ResNet-50 and for odd, even, padded and unpadded filters over 1 to 4
// channels; what does not take that form is refused by name.
#include "catch.hpp"
#include "stride_two_stem.hpp"

#include <gpucmp/models/space_to_depth.hpp>

#include <cstdint>
#include <random>
#include <vector>

namespace {

// Direct NHWC convolution with KRSC filters, integer sums.
std::vector<std::int64_t> convolve(const gpucmp::conv_problem& p, const std::vector<int>& x, const std::vector<int>& w) {
  std::vector<std::int64_t> y(std::size_t(p.n * p.p() * p.q() * p.k), 0);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t oy = 0; oy < p.p(); ++oy) {
      for (std::int64_t ox = 0; ox < p.q(); ++ox) {
        for (std::int64_t k = 0; k < p.k; ++k) {
          std::int64_t sum = 0;
          for (std::int64_t r = 0; r < p.r; ++r) {
            for (std::int64_t s = 0; s < p.s; ++s) {
              const std::int64_t iy = oy * p.stride_h - p.pad_h + r, ix = ox * p.stride_w - p.pad_w + s;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              for (std::int64_t c = 0; c < p.c; ++c) {
                sum += std::int64_t(x[std::size_t(((n * p.h + iy) * p.w + ix) * p.c + c)]) *
                       w[std::size_t(((k * p.r + r) * p.s + s) * p.c + c)];
              }
            }
          }
          y[std::size_t(((n * p.p() + oy) * p.q() + ox) * p.k + k)] = sum;
        }
      }
    }
  }
  return y;
}

// The image as the header's comment defines it: X'(a, b, (dy, dx, c)) = x(2a + dy - off, 2b +
// dx - off, c), zero outside x and past 4C channels.
std::vector<int> image_of(const gpucmp::space_to_depth_conv& g, const std::vector<int>& x) {
  const gpucmp::conv_problem &o = g.original, &t = g.transformed;
  std::vector<int> out(std::size_t(t.n * t.h * t.w * t.c), 0);
  for (std::int64_t n = 0; n < t.n; ++n) {
    for (std::int64_t a = 0; a < t.h; ++a) {
      for (std::int64_t b = 0; b < t.w; ++b) {
        for (std::int64_t dy = 0; dy < 2; ++dy) {
          for (std::int64_t dx = 0; dx < 2; ++dx) {
            for (std::int64_t c = 0; c < o.c; ++c) {
              const std::int64_t row = 2 * a + dy - g.offset, col = 2 * b + dx - g.offset;
              if (row < 0 || row >= o.h || col < 0 || col >= o.w) continue;
              out[std::size_t(((n * t.h + a) * t.w + b) * t.c + (dy * 2 + dx) * o.c + c)] =
                  x[std::size_t(((n * o.h + row) * o.w + col) * o.c + c)];
            }
          }
        }
      }
    }
  }
  return out;
}

using gpucmp_test::stride_two_stem;

}  // namespace

TEST_CASE("a stride-2 convolution equals the stride-1 one over its space-to-depth image", "[space_to_depth]") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> value(-127, 127);
  // ResNet-50's stem (7x7, pad 3) small; odd and even filters, odd and even images, pad 0 to 3.
  for (const gpucmp::conv_problem& p :
       {stride_two_stem(3, 20, 20, 7, 3), stride_two_stem(3, 17, 22, 7, 3), stride_two_stem(1, 9, 9, 3, 1),
        stride_two_stem(4, 12, 10, 4, 1), stride_two_stem(2, 11, 11, 5, 2), stride_two_stem(3, 10, 10, 3, 0),
        stride_two_stem(4, 8, 9, 2, 0)}) {
    const gpucmp::space_to_depth_conv g(p);
    INFO(p.shape_name() << " as " << g.transformed.shape_name());
    CHECK(g.transformed.stride_h == 1);
    CHECK(g.transformed.c == 16);
    CHECK(g.transformed.r == (p.r + 1) / 2);
    CHECK(g.transformed.p() == p.p());
    CHECK(g.transformed.q() == p.q());
    std::vector<int> x(std::size_t(p.n * p.h * p.w * p.c)), w(std::size_t(p.k * p.r * p.s * p.c));
    for (int& v : x) v = value(rng);
    for (int& v : w) v = value(rng);
    // Filters through transform_filters as bytes (two's complement INT8).
    std::vector<std::uint8_t> bytes(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) bytes[i] = std::uint8_t(std::int8_t(w[i]));
    const std::vector<std::uint8_t> moved = g.transform_filters(bytes);
    REQUIRE(moved.size() == std::size_t(g.transformed.k * g.transformed.r * g.transformed.s * 16));
    std::vector<int> w2(moved.size());
    for (std::size_t i = 0; i < moved.size(); ++i) w2[i] = std::int8_t(moved[i]);
    const std::vector<std::int64_t> expected = convolve(p, x, w), got = convolve(g.transformed, image_of(g, x), w2);
    REQUIRE(got.size() == expected.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
    CHECK(differ == 0);
    // Every filter value lands once; the rest are zeros.
    std::size_t nonzero = 0;
    for (int v : w2) nonzero += v != 0;
    std::size_t original_nonzero = 0;
    for (int v : w) original_nonzero += v != 0;
    CHECK(nonzero == original_nonzero);
  }
}

TEST_CASE("space-to-depth refuses what it cannot regroup, by name", "[space_to_depth]") {
  gpucmp::conv_problem p = stride_two_stem(3, 20, 20, 7, 3);
  CHECK(gpucmp::space_to_depth_conv::refusal(p).empty());
  p.stride_h = p.stride_w = 1;
  CHECK_THROWS_WITH(gpucmp::space_to_depth_conv(p), GPUCMP_CONTAINS("stride-2"));
  p = stride_two_stem(8, 20, 20, 3, 1);
  CHECK_THROWS_WITH(gpucmp::space_to_depth_conv(p), GPUCMP_CONTAINS("at most 4 channels"));
  p = stride_two_stem(3, 20, 20, 7, 3);
  p.layout = gpucmp::conv_layout::nchw;
  CHECK_THROWS_WITH(gpucmp::space_to_depth_conv(p), GPUCMP_CONTAINS("NHWC"));
  p = stride_two_stem(3, 20, 20, 7, 3);
  p.pad_w = 2;
  CHECK_THROWS_WITH(gpucmp::space_to_depth_conv(p), GPUCMP_CONTAINS("padding parity"));
  const gpucmp::space_to_depth_conv g(stride_two_stem(3, 20, 20, 7, 3));
  CHECK_THROWS_WITH(g.transform_filters(std::vector<std::uint8_t>(10)), GPUCMP_CONTAINS("10 filter bytes"));
}
