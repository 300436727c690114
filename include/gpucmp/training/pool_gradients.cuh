// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Pooling in a training step: max pooling's forward pass also records which element of each
// window won (one byte per output: the first maximum in row-major window order, as torch
// picks on ties), and the backward passes of max, average and global average pooling. Every
// backward kernel gathers (one thread per input element, summing the windows that contain
// it) instead of scattering with atomics, so gradients are the same bit for bit every run.
// NHWC tensors whose channels fill 16-byte packs (ResNet's) take packed kernels with 32-bit
// indices; they visit windows in the same order with the same float sums, so they give the
// generic kernels' results bit for bit.
// The forward passes of average and global average pooling are inference's
// (models/pooling.cuh).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/pooling.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/packed_elements.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace gpucmp {

namespace detail {

// One thread per output: y = the window's maximum, argmax = its position r * kernel + t.
template <class T>
__global__ void max_pool_argmax_kernel(pool_shape s, const T* x, T* y, std::uint8_t* argmax) {
  const std::int64_t p = s.p(), q = s.q(), count = s.n * p * q * s.c;
  const bool nhwc = s.layout == conv_layout::nhwc;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = nhwc ? i % s.c : (i / (q * p)) % s.c;
    const std::int64_t qi = nhwc ? (i / s.c) % q : i % q;
    const std::int64_t pi = nhwc ? (i / (s.c * q)) % p : (i / q) % p;
    const std::int64_t ni = i / (s.c * q * p);
    float best = -INFINITY;
    int where = -1;
    for (std::int64_t r = 0; r < s.kernel; ++r) {
      const std::int64_t hi = pi * s.stride - s.pad + r;
      if (hi < 0 || hi >= s.h) continue;
      for (std::int64_t t = 0; t < s.kernel; ++t) {
        const std::int64_t wi = qi * s.stride - s.pad + t;
        if (wi < 0 || wi >= s.w) continue;
        const float v = float(to_double(x[s.x_at(ni, ci, hi, wi)]));
        if (v > best || where < 0) {  // the first maximum wins; a NaN never does after the first element
          best = v;
          where = int(r * s.kernel + t);
        }
      }
    }
    y[i] = from_double<T>(best);
    argmax[i] = std::uint8_t(where);
  }
}

// One thread per input element: the sum over the windows that contain it of dy (max: only
// where the window's argmax is this element; average: dy / kernel^2).
template <class T>
__global__ void pool_backward_kernel(pool_kind kind, pool_shape s, const T* dy, const std::uint8_t* argmax, T* dx) {
  const std::int64_t p = s.p(), q = s.q(), count = s.n * s.h * s.w * s.c;
  const bool nhwc = s.layout == conv_layout::nhwc;
  const float area = float(s.kernel * s.kernel);
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = nhwc ? i % s.c : (i / (s.w * s.h)) % s.c;
    const std::int64_t wi = nhwc ? (i / s.c) % s.w : i % s.w;
    const std::int64_t hi = nhwc ? (i / (s.c * s.w)) % s.h : (i / s.w) % s.h;
    const std::int64_t ni = i / (s.c * s.w * s.h);
    // Windows pi with pi * stride - pad <= hi < pi * stride - pad + kernel.
    const std::int64_t p_from = (hi + s.pad - s.kernel + s.stride) / s.stride, p_to = (hi + s.pad) / s.stride;
    const std::int64_t q_from = (wi + s.pad - s.kernel + s.stride) / s.stride, q_to = (wi + s.pad) / s.stride;
    const std::int64_t p_first = p_from > 0 ? p_from : 0, p_last = p_to < p - 1 ? p_to : p - 1;
    const std::int64_t q_first = q_from > 0 ? q_from : 0, q_last = q_to < q - 1 ? q_to : q - 1;
    float sum = 0;
    for (std::int64_t pi = p_first; pi <= p_last; ++pi) {
      const std::int64_t r = hi - (pi * s.stride - s.pad);
      if (r < 0 || r >= s.kernel) continue;
      for (std::int64_t qi = q_first; qi <= q_last; ++qi) {
        const std::int64_t t = wi - (qi * s.stride - s.pad);
        if (t < 0 || t >= s.kernel) continue;
        const std::int64_t o = s.y_at(ni, ci, pi, qi);
        if (kind == pool_kind::max) {
          if (argmax[o] == r * s.kernel + t) sum += float(to_double(dy[o]));
        } else {
          sum += float(to_double(dy[o])) / area;
        }
      }
    }
    dx[i] = from_double<T>(sum);
  }
}

// The packed NHWC kernels' shape: 32-bit, channels counted in packs of 16 bytes.
struct nhwc_pool_dims {
  int n, h, w, packs, p, q, kernel, stride, pad;
};

// A pack's argmax bytes (one per channel) as one aligned word.
template <int width>
using argmax_word = std::conditional_t<width == 8, uint2, std::uint32_t>;

// max_pool_argmax_kernel's results for pack i of channels of one output pixel: one thread's
// work, callable on the host too (tests/unit/packed_kernels_test.cu checks the index math).
template <class T>
__host__ __device__ inline void max_pool_argmax_packed_at(const nhwc_pool_dims& d, const packed<T>* x, packed<T>* y,
                                                          std::uint8_t* argmax, int i) {
  constexpr int width = packed<T>::width;
  const int pack = i % d.packs, pixel = i / d.packs;
  const int qi = pixel % d.q, pi = (pixel / d.q) % d.p, ni = pixel / (d.q * d.p);
  float best[width];
  int where[width];
  for (int k = 0; k < width; ++k) {
    best[k] = -INFINITY;
    where[k] = -1;
  }
  for (int r = 0; r < d.kernel; ++r) {
    const int hi = pi * d.stride - d.pad + r;
    if (hi < 0 || hi >= d.h) continue;
    for (int t = 0; t < d.kernel; ++t) {
      const int wi = qi * d.stride - d.pad + t;
      if (wi < 0 || wi >= d.w) continue;
      const packed<T> v = x[((ni * d.h + hi) * d.w + wi) * d.packs + pack];
      for (int k = 0; k < width; ++k) {
        const float e = to_float(v.v[k]);
        if (e > best[k] || where[k] < 0) {  // as the generic kernel: the first maximum wins
          best[k] = e;
          where[k] = r * d.kernel + t;
        }
      }
    }
  }
  packed<T> out;
  std::uint8_t at[width];
  for (int k = 0; k < width; ++k) {
    out.v[k] = from_float<T>(best[k]);
    at[k] = std::uint8_t(where[k]);
  }
  y[i] = out;
  argmax_word<width> word;
  std::memcpy(&word, at, width);
  reinterpret_cast<argmax_word<width>*>(argmax)[i] = word;
}

template <class T>
__global__ void max_pool_argmax_packed_kernel(nhwc_pool_dims d, const packed<T>* x, packed<T>* y, std::uint8_t* argmax) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < d.n * d.p * d.q * d.packs) max_pool_argmax_packed_at(d, x, y, argmax, i);
}

// pool_backward_kernel's results for pack i of channels of one input pixel (as above).
template <class T>
__host__ __device__ inline void pool_backward_packed_at(pool_kind kind, const nhwc_pool_dims& d, const packed<T>* dy,
                                                        const std::uint8_t* argmax, packed<T>* dx, int i) {
  constexpr int width = packed<T>::width;
  const int pack = i % d.packs, pixel = i / d.packs;
  const int wi = pixel % d.w, hi = (pixel / d.w) % d.h, ni = pixel / (d.w * d.h);
  // Windows pi with pi * stride - pad <= hi < pi * stride - pad + kernel (as the generic kernel).
  const int p_from = (hi + d.pad - d.kernel + d.stride) / d.stride, p_to = (hi + d.pad) / d.stride;
  const int q_from = (wi + d.pad - d.kernel + d.stride) / d.stride, q_to = (wi + d.pad) / d.stride;
  const int p_first = p_from > 0 ? p_from : 0, p_last = p_to < d.p - 1 ? p_to : d.p - 1;
  const int q_first = q_from > 0 ? q_from : 0, q_last = q_to < d.q - 1 ? q_to : d.q - 1;
  const float area = float(d.kernel * d.kernel);
  float sum[width] = {};
  for (int pi = p_first; pi <= p_last; ++pi) {
    const int r = hi - (pi * d.stride - d.pad);
    if (r < 0 || r >= d.kernel) continue;
    for (int qi = q_first; qi <= q_last; ++qi) {
      const int t = wi - (qi * d.stride - d.pad);
      if (t < 0 || t >= d.kernel) continue;
      const int o = ((ni * d.p + pi) * d.q + qi) * d.packs + pack;
      const packed<T> g = dy[o];
      if (kind == pool_kind::max) {
        const argmax_word<width> word = reinterpret_cast<const argmax_word<width>*>(argmax)[o];
        std::uint8_t at[width];
        std::memcpy(at, &word, width);
        for (int k = 0; k < width; ++k) {
          if (at[k] == r * d.kernel + t) sum[k] += to_float(g.v[k]);
        }
      } else {
        for (int k = 0; k < width; ++k) sum[k] += to_float(g.v[k]) / area;
      }
    }
  }
  packed<T> out;
  for (int k = 0; k < width; ++k) out.v[k] = from_float<T>(sum[k]);
  dx[i] = out;
}

template <class T>
__global__ void pool_backward_packed_kernel(pool_kind kind, nhwc_pool_dims d, const packed<T>* dy, const std::uint8_t* argmax,
                                            packed<T>* dx) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < d.n * d.h * d.w * d.packs) pool_backward_packed_at(kind, d, dy, argmax, dx, i);
}

// The packed kernels' shape for `s`, when they take it: NHWC, FP32/FP16/BF16, channels in
// whole packs, every pointer 16-byte aligned (argmax: a pack's width), and 32-bit indices.
template <class T>
bool packed_pool_dims(const pool_shape& s, std::initializer_list<const void*> tensors, const std::uint8_t* argmax,
                      nhwc_pool_dims& d) {
  constexpr int width = packed<T>::width;
  if (s.layout != conv_layout::nhwc || s.c % width != 0 || !all_packable(tensors)) return false;
  if (reinterpret_cast<std::uintptr_t>(argmax) % width != 0) return false;
  const std::int64_t packs = s.c / width, limit = std::numeric_limits<int>::max() / 2;  // a thread's index never overflows
  if (s.n * s.h * s.w * packs > limit || s.n * s.p() * s.q() * packs > limit) return false;
  d = {int(s.n), int(s.h), int(s.w), int(packs), int(s.p()), int(s.q()), int(s.kernel), int(s.stride), int(s.pad)};
  return true;
}

template <class T>
__global__ void global_average_pool_backward_kernel(std::int64_t n, std::int64_t pixels, std::int64_t c, conv_layout layout,
                                                    const T* dy, T* dx) {
  const std::int64_t count = n * pixels * c;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = layout == conv_layout::nhwc ? i % c : (i / pixels) % c;
    const std::int64_t ni = i / (pixels * c);
    dx[i] = from_double<T>(float(to_double(dy[ni * c + ci])) / float(pixels));
  }
}

}  // namespace detail

/// Enqueues max pooling for training: y as pool_forward() gives it, and `argmax` (one byte
/// per output) for the backward pass. Throws invalid_argument for a window of more than 255
/// elements.
template <class T>
void max_pool_forward_training(const pool_shape& s, const T* x, T* y, std::uint8_t* argmax, cudaStream_t stream) {
  s.validate();
  if (s.kernel * s.kernel > 255) throw invalid_argument("max_pool_forward_training: windows of at most 255 elements");
  if constexpr (packable_v<T>) {
    detail::nhwc_pool_dims d{};
    if (detail::packed_pool_dims<T>(s, {x, y}, argmax, d)) {
      using P = packed<T>;
      detail::max_pool_argmax_packed_kernel<T><<<packed_blocks(std::int64_t(d.n) * d.p * d.q * d.packs), 256, 0, stream>>>(
          d, reinterpret_cast<const P*>(x), reinterpret_cast<P*>(y), argmax);
      GPUCMP_CUDA_CHECK_LAST("max_pool_argmax_packed_kernel");
      return;
    }
  }
  detail::max_pool_argmax_kernel<T><<<detail::grid_for(s.n * s.p() * s.q() * s.c), 256, 0, stream>>>(s, x, y, argmax);
  GPUCMP_CUDA_CHECK_LAST("max_pool_argmax_kernel");
}

/// Enqueues pooling's backward pass: dx (the input's shape) from dy (the output's), with the
/// forward pass's `argmax` for max pooling (unused for average pooling, which counts padding
/// as zeros, torch's default). dx is written, not accumulated.
template <class T>
void pool_backward(pool_kind kind, const pool_shape& s, const T* dy, const std::uint8_t* argmax, T* dx, cudaStream_t stream) {
  s.validate();
  if (kind == pool_kind::max && argmax == nullptr) throw invalid_argument("pool_backward: max pooling needs the forward pass's argmax");
  if constexpr (packable_v<T>) {
    detail::nhwc_pool_dims d{};
    if (detail::packed_pool_dims<T>(s, {dy, dx}, argmax, d)) {
      using P = packed<T>;
      detail::pool_backward_packed_kernel<T><<<packed_blocks(std::int64_t(d.n) * d.h * d.w * d.packs), 256, 0, stream>>>(
          kind, d, reinterpret_cast<const P*>(dy), argmax, reinterpret_cast<P*>(dx));
      GPUCMP_CUDA_CHECK_LAST("pool_backward_packed_kernel");
      return;
    }
  }
  detail::pool_backward_kernel<T><<<detail::grid_for(s.n * s.h * s.w * s.c), 256, 0, stream>>>(kind, s, dy, argmax, dx);
  GPUCMP_CUDA_CHECK_LAST("pool_backward_kernel");
}

/// Enqueues global average pooling's backward pass: dx (N x pixels x C in NHWC, N x C x
/// pixels in NCHW) = dy (N x C) / pixels, written.
template <class T>
void global_average_pool_backward(std::int64_t n, std::int64_t pixels, std::int64_t c, const T* dy, T* dx, cudaStream_t stream,
                                  conv_layout layout = conv_layout::nhwc) {
  if (n <= 0 || pixels <= 0 || c <= 0) throw invalid_argument("global_average_pool_backward: n, pixels and c must be positive");
  detail::global_average_pool_backward_kernel<T><<<detail::grid_for(n * pixels * c), 256, 0, stream>>>(n, pixels, c, layout, dy, dx);
  GPUCMP_CUDA_CHECK_LAST("global_average_pool_backward_kernel");
}

}  // namespace gpucmp
