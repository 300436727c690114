// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Pooling layers for inference: max and average pooling over square windows (torch's
// MaxPool2d, and AvgPool2d with count_include_pad=True) and global average pooling to N x C,
// in NHWC (threads run along C, so a warp reads consecutive channels; 16-byte loads where C
// allows) or NCHW (threads run along W). Each has a host reference for its verification.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// Which reduction a pooling window makes.
enum class pool_kind {
  max,      ///< largest value (padding never wins)
  average,  ///< sum / (kernel * kernel), padding counted as zeros (torch's default)
};

/// "max" or "average".
inline const char* to_string(pool_kind k) noexcept { return k == pool_kind::max ? "max" : "average"; }

/// One pooling layer's shape (square windows) and its tensors' layout.
struct pool_shape {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  ///< input
  std::int64_t kernel = 1, stride = 1, pad = 0;
  conv_layout layout = conv_layout::nhwc;   ///< of input and output

  __host__ __device__ std::int64_t p() const noexcept { return (h + 2 * pad - kernel) / stride + 1; }  ///< output height
  __host__ __device__ std::int64_t q() const noexcept { return (w + 2 * pad - kernel) / stride + 1; }  ///< output width
  /// Offset of input element (ni, ci, hi, wi).
  __host__ __device__ std::int64_t x_at(std::int64_t ni, std::int64_t ci, std::int64_t hi,
                                        std::int64_t wi) const noexcept {
    return layout == conv_layout::nhwc ? ((ni * h + hi) * w + wi) * c + ci : ((ni * c + ci) * h + hi) * w + wi;
  }
  /// Offset of output element (ni, ci, pi, qi).
  __host__ __device__ std::int64_t y_at(std::int64_t ni, std::int64_t ci, std::int64_t pi,
                                        std::int64_t qi) const noexcept {
    return layout == conv_layout::nhwc ? ((ni * p() + pi) * q() + qi) * c + ci : ((ni * c + ci) * p() + pi) * q() + qi;
  }
  /// Throws invalid_argument naming what is wrong.
  void validate() const {
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) throw invalid_argument("pool_shape: n, c, h and w must be positive");
    if (kernel < 1 || stride < 1 || pad < 0) throw invalid_argument("pool_shape: kernel and stride must be >= 1, pad >= 0");
    if (2 * pad > kernel) {  // torch's rule: a window never lies wholly in the padding
      throw invalid_argument("pool_shape: padding " + std::to_string(pad) + " must be at most half the kernel " + std::to_string(kernel));
    }
    if (h + 2 * pad < kernel || w + 2 * pad < kernel) throw invalid_argument("pool_shape: the window is larger than the padded input");
  }
};

namespace detail {

template <class T>
__host__ __device__ inline double pool_window(pool_kind kind, const pool_shape& s, const T* x, std::int64_t ni,
                                              std::int64_t pi, std::int64_t qi, std::int64_t ci, double* magnitude = nullptr) {
  double best = -INFINITY, sum = 0, absolute = 0;
  for (std::int64_t r = 0; r < s.kernel; ++r) {
    const std::int64_t hi = pi * s.stride - s.pad + r;
    if (hi < 0 || hi >= s.h) continue;
    for (std::int64_t t = 0; t < s.kernel; ++t) {
      const std::int64_t wi = qi * s.stride - s.pad + t;
      if (wi < 0 || wi >= s.w) continue;
      const double v = to_double(x[s.x_at(ni, ci, hi, wi)]);
      best = v > best ? v : best;
      sum += v;
      absolute += v < 0 ? -v : v;
    }
  }
  if (magnitude != nullptr) *magnitude = absolute / double(s.kernel * s.kernel);  // the scale of an average's rounding
  return kind == pool_kind::max ? best : sum / double(s.kernel * s.kernel);
}

// One thread per output, consecutive threads on consecutive outputs in memory order (along C
// in NHWC, along W in NCHW).
template <class T>
__global__ void pool_kernel(pool_kind kind, pool_shape s, const T* x, T* y) {
  const std::int64_t p = s.p(), q = s.q(), count = s.n * p * q * s.c;
  const bool nhwc = s.layout == conv_layout::nhwc;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = nhwc ? i % s.c : (i / (q * p)) % s.c;
    const std::int64_t qi = nhwc ? (i / s.c) % q : i % q;
    const std::int64_t pi = nhwc ? (i / (s.c * q)) % p : (i / q) % p;
    const std::int64_t ni = i / (s.c * q * p);
    y[i] = from_double<T>(pool_window(kind, s, x, ni, pi, qi, ci));
  }
}

// Pooling with 16-byte loads: each thread makes V = 16 / sizeof(T) channels of one output
// pixel (C a multiple of V; NHWC rows are then 16-byte aligned). Same arithmetic as above.
template <class T>
__global__ void pool_vector_kernel(pool_kind kind, pool_shape s, const T* x, T* y) {
  constexpr int V = 16 / sizeof(T);
  const std::int64_t groups = s.c / V, count = s.n * s.p() * s.q() * groups;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t g = i % groups, qi = (i / groups) % s.q(), pi = (i / (groups * s.q())) % s.p(),
                       ni = i / (groups * s.q() * s.p());
    float best[V], sum[V];
    for (int v = 0; v < V; ++v) {
      best[v] = -INFINITY;
      sum[v] = 0;
    }
    for (std::int64_t r = 0; r < s.kernel; ++r) {
      const std::int64_t hi = pi * s.stride - s.pad + r;
      if (hi < 0 || hi >= s.h) continue;
      for (std::int64_t t = 0; t < s.kernel; ++t) {
        const std::int64_t wi = qi * s.stride - s.pad + t;
        if (wi < 0 || wi >= s.w) continue;
        const uint4 raw = *reinterpret_cast<const uint4*>(x + s.x_at(ni, g * V, hi, wi));
        const T* e = reinterpret_cast<const T*>(&raw);
        for (int v = 0; v < V; ++v) {
          const float f = float(to_double(e[v]));
          best[v] = fmaxf(best[v], f);
          sum[v] += f;
        }
      }
    }
    uint4 out;
    T* o = reinterpret_cast<T*>(&out);
    for (int v = 0; v < V; ++v) o[v] = from_double<T>(kind == pool_kind::max ? best[v] : sum[v] / float(s.kernel * s.kernel));
    *reinterpret_cast<uint4*>(y + i * V) = out;
  }
}

// Offset of pixel `p` of channel `ci` of image `ni` in an N x pixels x C (NHWC) or
// N x C x pixels (NCHW) tensor.
__host__ __device__ inline std::int64_t pixel_at(conv_layout layout, std::int64_t pixels, std::int64_t c, std::int64_t ni,
                                                 std::int64_t ci, std::int64_t p) {
  return layout == conv_layout::nhwc ? (ni * pixels + p) * c + ci : (ni * c + ci) * pixels + p;
}

template <class T>
__global__ void global_average_pool_kernel(std::int64_t n, std::int64_t pixels, std::int64_t c, conv_layout layout, const T* x, T* y) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n * c;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = i % c, ni = i / c;
    float sum = 0;
    for (std::int64_t p = 0; p < pixels; ++p) sum += float(to_double(x[pixel_at(layout, pixels, c, ni, ci, p)]));
    y[i] = from_double<T>(sum / float(pixels));
  }
}

inline unsigned grid_for(std::int64_t count) { return unsigned(std::min<std::int64_t>((count + 255) / 256, 132 * 32)); }

}  // namespace detail

/// Enqueues a pooling layer: x is N x H x W x C and y N x P x Q x C (NHWC), or N x C x H x W
/// and N x C x P x Q (NCHW).
template <class T>
void pool_forward(pool_kind kind, const pool_shape& s, const T* x, T* y, cudaStream_t stream) {
  constexpr std::int64_t vector = 16 / sizeof(T);
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (s.layout == conv_layout::nhwc && s.c % vector == 0 && aligned) {
    detail::pool_vector_kernel<T><<<detail::grid_for(s.n * s.p() * s.q() * s.c / vector), 256, 0, stream>>>(kind, s, x, y);
    GPUCMP_CUDA_CHECK_LAST("pool_vector_kernel");
    return;
  }
  detail::pool_kernel<T><<<detail::grid_for(s.n * s.p() * s.q() * s.c), 256, 0, stream>>>(kind, s, x, y);
  GPUCMP_CUDA_CHECK_LAST("pool_kernel");
}

/// Enqueues global average pooling: x is N x pixels x C (NHWC) or N x C x pixels (NCHW), y
/// is N x C; sums in FP32.
template <class T>
void global_average_pool_forward(std::int64_t n, std::int64_t pixels, std::int64_t c, const T* x, T* y, cudaStream_t stream,
                                 conv_layout layout = conv_layout::nhwc) {
  detail::global_average_pool_kernel<T><<<detail::grid_for(n * c), 256, 0, stream>>>(n, pixels, c, layout, x, y);
  GPUCMP_CUDA_CHECK_LAST("global_average_pool_kernel");
}

/// Compares a pooling layer's output `y` with a double reference computed from `x` (both on
/// the host, in s.layout): exact for max (a max rounds nothing), the FP32 sum's rounding plus one
/// rounding of the stored result for averages, with `tol` the storage type's (conv_tolerance).
template <class T>
verification check_pool(pool_kind kind, const pool_shape& s, const std::vector<T>& x, const std::vector<T>& y, const tolerance& tol) {
  verification v;
  v.method = std::string("FP64 CPU reference of ") + to_string(kind) + " pooling, every output";
  const std::int64_t p = s.p(), q = s.q();
  const double terms = double(s.kernel * s.kernel);
  for (std::int64_t ni = 0; ni < s.n; ++ni)
    for (std::int64_t pi = 0; pi < p; ++pi)
      for (std::int64_t qi = 0; qi < q; ++qi)
        for (std::int64_t ci = 0; ci < s.c; ++ci) {
          double magnitude = 0;
          const double ref = detail::pool_window(kind, s, x.data(), ni, pi, qi, ci, &magnitude);
          const std::size_t at = std::size_t(s.y_at(ni, ci, pi, qi));
          // A max rounds nothing; an average sums in FP32 (errors scale with the terms'
          // magnitudes, not with a cancelled sum) and rounds once to T.
          const double bound = kind == pool_kind::max ? 1e-300 : tol.bound(ref, magnitude, terms) + 0x1p-24 * magnitude;
          v.add(to_double(y[at]), ref, bound, "output " + std::to_string(at) + (s.layout == conv_layout::nhwc ? " (NHWC)" : " (NCHW)"));
        }
  return v;
}

/// Compares global average pooling's `y` (N x C) with a double reference from `x` (N x pixels
/// x C in NHWC, N x C x pixels in NCHW).
template <class T>
verification check_global_average_pool(std::int64_t n, std::int64_t pixels, std::int64_t c, const std::vector<T>& x,
                                       const std::vector<T>& y, const tolerance& tol, conv_layout layout = conv_layout::nhwc) {
  verification v;
  v.method = "FP64 CPU reference of global average pooling, every output";
  for (std::int64_t ni = 0; ni < n; ++ni)
    for (std::int64_t ci = 0; ci < c; ++ci) {
      double sum = 0, magnitude = 0;
      for (std::int64_t p = 0; p < pixels; ++p) {
        const double e = to_double(x[std::size_t(detail::pixel_at(layout, pixels, c, ni, ci, p))]);
        sum += e;
        magnitude += std::fabs(e);
      }
      const double ref = sum / double(pixels);
      // FP32 accumulation of `pixels` terms, then one rounding to T.
      const double bound = tol.bound(ref, magnitude / double(pixels), double(pixels)) + 0x1p-24 * magnitude / double(pixels);
      v.add(to_double(y[std::size_t(ni * c + ci)]), ref, bound, "batch " + std::to_string(ni) + ", channel " + std::to_string(ci));
    }
  return v;
}

}  // namespace gpucmp
