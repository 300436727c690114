// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Pooling layers for inference: max and average pooling over square windows (torch's
// MaxPool2d, and AvgPool2d with count_include_pad=True) and global average pooling to N x C,
// in NHWC (threads run along C, so a warp reads consecutive channels; 16-byte loads where C
// allows) or NCHW (threads run along W). Each has a host reference for its verification.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/fast_divisor.cuh>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/packed_elements.cuh>
#include <gpucmp/ops/verification.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
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

// The vector kernel's shape (NHWC, channels in 16-byte vectors), in 32 bits: a thread's
// output vector i splits into (image, row, column, vector) with multiply-high divisions.
struct pool_vector_dims {
  int count;  // output vectors: N x P x Q x vectors
  int vectors, h, w, kernel, stride, pad;
  fast_divisor by_vectors, by_q, by_p;
};

// The larger of each pair of elements in two 32-bit words of T, in T's own arithmetic where the
// GPU has it (a maximum rounds nothing, so no conversion is needed), else through float (exact
// both ways for a value that is already a T). Like fmaxf, a NaN loses to a number.
template <class T>
__host__ __device__ inline std::uint32_t max_of_words(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, std::int8_t>) {
    return __vmaxs4(a, b);
  } else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    using pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    pair x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    const pair m = __hmax2(x, y);
    std::uint32_t out;
    std::memcpy(&out, &m, 4);
    return out;
  } else if constexpr (std::is_same_v<T, __nv_fp8_e4m3> || std::is_same_v<T, __nv_fp8_e5m2>) {
    // Two pairs through FP16.
    constexpr __nv_fp8_interpretation_t format = std::is_same_v<T, __nv_fp8_e4m3> ? __NV_E4M3 : __NV_E5M2;
    std::uint32_t out = 0;
    for (int half = 0; half < 2; ++half) {
      const auto x = __nv_fp8x2_storage_t(a >> (16 * half)), y = __nv_fp8x2_storage_t(b >> (16 * half));
      const __half2 m = __hmax2(__half2(__nv_cvt_fp8x2_to_halfraw2(x, format)), __half2(__nv_cvt_fp8x2_to_halfraw2(y, format)));
      out |= std::uint32_t(__nv_cvt_halfraw2_to_fp8x2(__half2_raw(m), __NV_SATFINITE, format)) << (16 * half);
    }
    return out;
  } else
#endif
  {  // FP32, and on the host every type
    constexpr int per_word = int(4 / sizeof(T));
    T x[per_word], y[per_word];
    std::memcpy(static_cast<void*>(x), &a, 4);  // (void*: T's bits, whatever its members)
    std::memcpy(static_cast<void*>(y), &b, 4);
    for (int e = 0; e < per_word; ++e) x[e] = T(fmaxf(to_float(x[e]), to_float(y[e])));
    std::uint32_t out;
    std::memcpy(&out, x, 4);
    return out;
  }
}

// Pooling with 16-byte loads and 32-bit indices: each thread makes V = 16 / sizeof(T) channels
// of one output pixel, output vector i (callable on the host too: tests/unit/packed_kernels_test.cu
// checks it). A window always holds an input element (pool_shape::validate), so the maximum
// starts from the first; averages sum in FP32. (The first version indexed in 64 bits and
// converted every element through double: ResNet-50's max pooling took 42.6 us in FP16 at batch
// 32 on the H200, 1.5 TB/s.)
template <class T>
__host__ __device__ inline void pool_vector_at(pool_kind kind, const pool_vector_dims& d, const T* x, T* y, int i) {
  constexpr int V = 16 / sizeof(T);
  const int pixel = d.by_vectors.divide(i), vector = i - pixel * d.vectors;
  const int row = d.by_q.divide(pixel), qi = pixel - row * d.by_q.divisor();
  const int ni = d.by_p.divide(row), pi = row - ni * d.by_p.divisor();
  const int top = pi * d.stride - d.pad, left = qi * d.stride - d.pad;
  const int r_first = top < 0 ? -top : 0, r_end = d.h - top < d.kernel ? d.h - top : d.kernel;
  const int t_first = left < 0 ? -left : 0, t_end = d.w - left < d.kernel ? d.w - left : d.kernel;
  const uint4* image = reinterpret_cast<const uint4*>(x) + ni * d.h * d.w * d.vectors + vector;
  auto load = [&](int r, int t) {
    const uint4* at = image + ((top + r) * d.w + left + t) * d.vectors;
#if defined(__CUDA_ARCH__)
    return __ldg(at);
#else
    return *at;
#endif
  };
  uint4 out{};
  if (kind == pool_kind::max) {
    bool first = true;
    for (int r = r_first; r < r_end; ++r) {
      for (int t = t_first; t < t_end; ++t) {
        const uint4 v = load(r, t);
        if (first) {
          out = v;
          first = false;
        } else {
          out.x = max_of_words<T>(out.x, v.x);
          out.y = max_of_words<T>(out.y, v.y);
          out.z = max_of_words<T>(out.z, v.z);
          out.w = max_of_words<T>(out.w, v.w);
        }
      }
    }
  } else {
    float sum[V] = {};
    for (int r = r_first; r < r_end; ++r) {
      for (int t = t_first; t < t_end; ++t) {
        const uint4 raw = load(r, t);
        T e[V];
        std::memcpy(static_cast<void*>(e), &raw, 16);
        for (int v = 0; v < V; ++v) sum[v] += to_float(e[v]);
      }
    }
    T o[V];
    for (int v = 0; v < V; ++v) o[v] = from_double<T>(sum[v] / float(d.kernel * d.kernel));
    std::memcpy(&out, o, 16);
  }
  reinterpret_cast<uint4*>(y)[i] = out;
}

template <class T>
__global__ void pool_vector_kernel(pool_kind kind, pool_vector_dims d, const T* x, T* y) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < d.count) pool_vector_at(kind, d, x, y, i);
}

// The vector kernel's dims for `s`, or false where it does not apply: NCHW, channels that do
// not fill 16-byte vectors, unaligned tensors, or indices beyond 32 bits.
template <class T>
bool pool_vector_dims_for(const pool_shape& s, const T* x, const T* y, pool_vector_dims& d) {
  constexpr std::int64_t V = 16 / sizeof(T);
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (s.layout != conv_layout::nhwc || s.c % V != 0 || !aligned) return false;
  const std::int64_t vectors = s.c / V, limit = std::numeric_limits<int>::max() / 2;  // a thread's index never overflows
  if (s.n * s.h * s.w * vectors > limit || s.n * s.p() * s.q() * vectors > limit) return false;
  d.count = int(s.n * s.p() * s.q() * vectors);
  d.vectors = int(vectors);
  d.h = int(s.h);
  d.w = int(s.w);
  d.kernel = int(s.kernel);
  d.stride = int(s.stride);
  d.pad = int(s.pad);
  d.by_vectors = fast_divisor(vectors);
  d.by_q = fast_divisor(s.q());
  d.by_p = fast_divisor(s.p());
  return true;
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
    for (std::int64_t p = 0; p < pixels; ++p) sum += to_float(x[pixel_at(layout, pixels, c, ni, ci, p)]);
    y[i] = from_double<T>(sum / float(pixels));
  }
}

inline unsigned grid_for(std::int64_t count) { return unsigned(std::min<std::int64_t>((count + 255) / 256, 132 * 32)); }

}  // namespace detail

/// Enqueues a pooling layer: x is N x H x W x C and y N x P x Q x C (NHWC), or N x C x H x W
/// and N x C x P x Q (NCHW).
template <class T>
void pool_forward(pool_kind kind, const pool_shape& s, const T* x, T* y, cudaStream_t stream) {
  s.validate();
  detail::pool_vector_dims d{};
  if (detail::pool_vector_dims_for(s, x, y, d)) {
    detail::pool_vector_kernel<T><<<unsigned((d.count + 255) / 256), 256, 0, stream>>>(kind, d, x, y);
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
