// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A quantized network's first step when its stem runs on the input's space-to-depth image
// (models/space_to_depth.hpp): the FP16 NHWC input regrouped into that image and quantized to
// INT8 or FP8 in one pass, one thread per image pixel (16 one-byte channels). The per-pixel
// work runs on the host too, where the unit tests check it.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/fast_divisor.cuh>
#include <gpucmp/models/space_to_depth.hpp>
#include <gpucmp/ops/elements.cuh>

#include <cuda_fp16.h>

#include <cstdint>
#include <string>

namespace gpucmp {
namespace detail {

// The space-to-depth image's index arithmetic (quantize_space_to_depth_kernel): its pixels
// split into image, row and column by multiply-high divisions, 32-bit indices (the host checks
// that the pixels fit).
struct space_to_depth_dims {
  int pixels;                     // N x H' x W' of the image
  fast_divisor by_cols, by_rows;  // W' and H'
  int in_rows, in_cols, channels;  // the input's H, W and C (at most 4)
  int shift;                      // space_to_depth_conv's offset
};

// Pixel i of the FP16 NHWC input's space-to-depth image (space_to_depth_conv), quantized: its
// 16 channels (dy, dx, c), zero where the 2x2 block leaves the input and past 4C, built in
// registers as one 16-byte vector (a byte array indexed by the runtime channel count lived in
// local memory) and stored by the caller in one store. Host and device alike.
template <class Stored>
__host__ __device__ inline uint4 space_to_depth_pixel(const __half* x, const space_to_depth_dims& d, float inverse_scale,
                                                     int i) {
  const int line = d.by_cols.divide(i), b = i - line * d.by_cols.divisor();
  const int n = d.by_rows.divide(line), a = line - n * d.by_rows.divisor();
  std::uint64_t low = 0, high = 0;  // bytes 0-7 and 8-15; a zero byte is zero in INT8 and FP8 alike
  for (int block = 0; block < 4; ++block) {  // (dy, dx): block = 2 dy + dx; constant bounds: unrolled
    const int row = 2 * a + (block >> 1) - d.shift, col = 2 * b + (block & 1) - d.shift;
    if (row < 0 || row >= d.in_rows || col < 0 || col >= d.in_cols) continue;
    const __half* from = x + (std::int64_t(n * d.in_rows + row) * d.in_cols + col) * d.channels;
    for (int c = 0; c < 4; ++c) {
      if (c >= d.channels) break;
      const Stored q = quantize_saturated<Stored>(__half2float(from[c]) * inverse_scale);
      const std::uint64_t bits = reinterpret_cast<const unsigned char&>(q);
      const int at = block * d.channels + c;
      if (at < 8) {
        low |= bits << (8 * at);
      } else {
        high |= bits << (8 * (at - 8));
      }
    }
  }
  return make_uint4(unsigned(low), unsigned(low >> 32), unsigned(high), unsigned(high >> 32));
}

// The whole image, one thread per pixel (one thread per element with 64-bit divisions took
// 64 us for batch 32's 6.8 M elements on an H100, as long as the whole FP16 stem).
template <class Stored>
__global__ void quantize_space_to_depth_kernel(const __half* x, Stored* out, space_to_depth_dims d, float inverse_scale) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < d.pixels; i += stride) {
    reinterpret_cast<uint4*>(out)[i] = space_to_depth_pixel<Stored>(x, d, inverse_scale, int(i));
  }
}

// `g`'s image's dims; throws invalid_argument where its pixels do not fit 32 bits.
inline space_to_depth_dims space_to_depth_dims_for(const space_to_depth_conv& g) {
  const std::int64_t pixels = g.transformed.n * g.transformed.h * g.transformed.w;
  if (pixels >= (std::int64_t{1} << 31)) {
    throw invalid_argument("quantized network: a space-to-depth image of " + g.transformed.shape_name() +
                           " has 2^31 pixels or more (the input's quantization indexes them in 32 bits)");
  }
  return {int(pixels), fast_divisor(g.transformed.w), fast_divisor(g.transformed.h),
          int(g.original.h), int(g.original.w), int(g.original.c), int(g.offset)};
}

}  // namespace detail
}  // namespace gpucmp
