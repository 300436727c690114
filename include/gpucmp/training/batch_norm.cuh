// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Batch norm in training mode on tensors a network owns (component gpucmp::cudnn), with the
// epilogue a ResNet needs fused: y = act(BN(x) + z). The forward pass uses the batch's
// statistics, keeps the mean and 1/std for the backward pass and moves the running
// statistics (torch's rule: momentum 0.1 toward the mean and the unbiased variance). The
// backward pass gives dx, dgamma, dbeta and, with a residual, dz (the gradient of the added
// tensor, which is dy through the ReLU). gpucmp's kernels also take the output's gradient in
// two parts (dy + dy2, a tensor read by two layers) and sum them as they read.
//
// Two ways to run it:
//  - cuDNN's persistent NHWC kernels (cudnnBatchNormalizationForwardTrainingEx and
//    BackwardEx with BN, BN+ReLU or BN+add+ReLU), where cuDNN supports the shape and type;
//  - gpucmp's kernels, for every layout and precision: per-channel sums in FP32 per thread
//    and FP64 across threads, shifted by a sample of the channel so the variance does not
//    cancel, then one element-wise pass; NHWC tensors whose channels fill 16-byte packs
//    (ResNet's) move a pack per load and store, and the forward pass keeps the ReLU's mask
//    (a bit per element, in the reserve) so the backward pass need not read y.
// Parameters, statistics and their gradients are FP32 whatever the activations' type
// (master weights; torch's autocast keeps batch norm in FP32 too).
// verify() checks both passes at full size against an FP64 reference computed on the GPU.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_legacy.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/packed_elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/training/storage.cuh>

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace gpucmp {

/// A batch norm's hyper-parameters (torch's defaults).
struct batch_norm_options {
  double eps = 1e-5;       ///< added to the variance
  double momentum = 0.1;   ///< running = (1 - momentum) running + momentum batch
};

/// The tensors a batch norm layer reads and writes (device pointers; the layer owns none).
/// x, z, y, dy, dx and dz have the activations' type and layout; the rest are FP32, one value
/// per channel.
struct batch_norm_tensors {
  const void* x = nullptr;        ///< input
  const void* z = nullptr;        ///< added after the normalisation, before the ReLU (residual only)
  void* y = nullptr;              ///< output; the backward pass reads it for the ReLU's mask
  const float* gamma = nullptr;   ///< scale
  const float* beta = nullptr;    ///< shift
  float* running_mean = nullptr;  ///< updated by forward()
  float* running_var = nullptr;   ///< updated by forward() (unbiased)
  float* saved_mean = nullptr;    ///< written by forward(), read by backward()
  float* saved_inv_std = nullptr; ///< 1 / sqrt(biased variance + eps): as saved_mean
  const void* dy = nullptr;       ///< gradient of y
  /// A second gradient of y, added to dy (y read by two layers), so the sum is never written
  /// out; gpucmp's kernels only (null: none).
  const void* dy2 = nullptr;
  void* dx = nullptr;             ///< gradient of x (may be dy itself: written element by element after reading it)
  void* dz = nullptr;             ///< gradient of z (residual only)
  float* dgamma = nullptr;        ///< written, not accumulated
  float* dbeta = nullptr;         ///< written, not accumulated
};

/// One batch norm layer's shape and epilogue.
struct batch_norm_shape {
  std::int64_t n = 0, c = 0, h = 1, w = 1;
  numerics dtype = numerics::fp16;       ///< activations' type (TF32 stores FP32)
  conv_layout layout = conv_layout::nhwc;
  bool residual = false;                     ///< adds z
  bool relu = true;                          ///< ReLU last

  std::int64_t per_channel() const noexcept { return n * h * w; }   ///< values per channel
  std::int64_t elements() const noexcept { return n * c * h * w; }  ///< values of x
  /// "fp16_nhwc/n32_c64_h56_w56/bn+add+relu".
  std::string name() const {
    return std::string(to_string(dtype)) + "_" + to_string(layout) + "/n" + std::to_string(n) + "_c" + std::to_string(c) +
           "_h" + std::to_string(h) + "_w" + std::to_string(w) + "/bn" + (residual ? "+add" : "") + (relu ? "+relu" : "");
  }
};

/// How a batch norm layer runs.
enum class batch_norm_path {
  cudnn_persistent,  ///< cuDNN's *Ex calls, CUDNN_BATCHNORM_SPATIAL_PERSISTENT
  gpucmp_kernels,    ///< gpucmp's statistics and element-wise kernels
};

/// "cuDNN persistent" or "gpucmp kernels".
inline const char* to_string(batch_norm_path p) noexcept {
  return p == batch_norm_path::cudnn_persistent ? "cuDNN persistent" : "gpucmp kernels";
}

/// What verify() found, per pass.
struct batch_norm_verification {
  verification forward;   ///< y, the saved statistics and the running statistics
  verification backward;  ///< dx, dz, dgamma and dbeta
  bool passed() const noexcept { return forward.passed() && backward.passed(); }
};

namespace detail {

// Per-channel sums of one block's rows, NHWC: blockDim (32, 8), channel blockIdx.x * 32 + x.
// forward (dy == nullptr): s1 = sum(x - shift), s2 = sum((x - shift)^2), shift = x[0, c].
// backward: g = dy (+ dy2), e = relu ? (y > 0 ? g : 0) : g; s1 = sum(e), s2 = sum(e (x - mean)).
template <class T>
__device__ inline float bn_output_gradient(const T* y, const T* dy, const T* dy2, std::int64_t i, bool relu) {
  if (relu && !(float(to_double(y[i])) > 0.0f)) return 0.0f;
  return float(to_double(dy[i])) + (dy2 != nullptr ? float(to_double(dy2[i])) : 0.0f);
}

template <class T>
__global__ void bn_partial_sums_nhwc(const T* x, const T* y, const T* dy, const T* dy2, const float* mean, std::int64_t rows,
                                     std::int64_t c, bool relu, double* partial) {
  const std::int64_t ch = blockIdx.x * std::int64_t(32) + threadIdx.x;
  float s1 = 0, s2 = 0;
  if (ch < c) {
    const float center = dy == nullptr ? float(to_double(x[ch])) : mean[ch];
    for (std::int64_t m = blockIdx.y * std::int64_t(8) + threadIdx.y; m < rows; m += std::int64_t(gridDim.y) * 8) {
      const std::int64_t i = m * c + ch;
      const float d = float(to_double(x[i])) - center;
      if (dy == nullptr) {
        s1 += d;
        s2 += d * d;
      } else {
        const float e = bn_output_gradient(y, dy, dy2, i, relu);
        s1 += e;
        s2 += e * d;
      }
    }
  }
  __shared__ double sums[2][8][32];
  sums[0][threadIdx.y][threadIdx.x] = s1;
  sums[1][threadIdx.y][threadIdx.x] = s2;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    double t1 = 0, t2 = 0;
    for (int k = 0; k < 8; ++k) {
      t1 += sums[0][k][threadIdx.x];
      t2 += sums[1][k][threadIdx.x];
    }
    partial[(blockIdx.y * c + ch) * 2] = t1;
    partial[(blockIdx.y * c + ch) * 2 + 1] = t2;
  }
}

// The same sums in NCHW: one channel per blockIdx.x, 256 threads over its rows of a split.
template <class T>
__global__ void bn_partial_sums_nchw(const T* x, const T* y, const T* dy, const T* dy2, const float* mean, std::int64_t rows,
                                     std::int64_t c, std::int64_t plane, bool relu, double* partial) {
  const std::int64_t ch = blockIdx.x;
  const float center = dy == nullptr ? float(to_double(x[ch * plane])) : mean[ch];
  float s1 = 0, s2 = 0;
  for (std::int64_t m = blockIdx.y * std::int64_t(blockDim.x) + threadIdx.x; m < rows; m += std::int64_t(gridDim.y) * blockDim.x) {
    const std::int64_t i = ((m / plane) * c + ch) * plane + m % plane;
    const float d = float(to_double(x[i])) - center;
    if (dy == nullptr) {
      s1 += d;
      s2 += d * d;
    } else {
      const float e = bn_output_gradient(y, dy, dy2, i, relu);
      s1 += e;
      s2 += e * d;
    }
  }
  __shared__ double sums[2][256];
  sums[0][threadIdx.x] = s1;
  sums[1][threadIdx.x] = s2;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[0][threadIdx.x] += sums[0][threadIdx.x + half];
      sums[1][threadIdx.x] += sums[1][threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[(blockIdx.y * c + ch) * 2] = sums[0][0];
    partial[(blockIdx.y * c + ch) * 2 + 1] = sums[1][0];
  }
}

// One warp per channel sums the splits' partial sums (lane k takes splits k, k + 32, ...): a
// channel can have a thousand splits. The result is in lane 0. Every lane of a warp has the
// same channel, so a warp past the last channel has returned as a whole.
__device__ inline void bn_sum_splits(const double* partial, int splits, std::int64_t c, std::int64_t ch, double& s1, double& s2) {
  s1 = 0;
  s2 = 0;
  for (int k = int(threadIdx.x % 32); k < splits; k += 32) {
    s1 += partial[(k * c + ch) * 2];
    s2 += partial[(k * c + ch) * 2 + 1];
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    s1 += __shfl_down_sync(0xffffffffu, s1, offset);
    s2 += __shfl_down_sync(0xffffffffu, s2, offset);
  }
}

// Channel `ch`'s forward statistics from its mean and biased variance: the saved and running
// statistics (torch's momentum rule, the running variance unbiased) and y = x a + b's a and b.
__device__ inline void bn_store_statistics(std::int64_t ch, double mean, double biased, std::int64_t rows, const float* gamma,
                                           const float* beta, double eps, double momentum, float* running_mean,
                                           float* running_var, float* saved_mean, float* saved_inv_std, float* a, float* b) {
  const double inv_std = 1.0 / sqrt(biased + eps);
  saved_mean[ch] = float(mean);
  saved_inv_std[ch] = float(inv_std);
  running_mean[ch] = float((1 - momentum) * running_mean[ch] + momentum * mean);
  running_var[ch] = float((1 - momentum) * running_var[ch] + momentum * biased * double(rows) / double(rows - 1));
  const double scale = double(gamma[ch]) * inv_std;
  a[ch] = float(scale);
  b[ch] = float(double(beta[ch]) - mean * scale);
}

// Forward statistics from the partial sums: saved mean and 1/std, running statistics, and
// y = x a + b per channel (a = gamma / std, b = beta - mean a). A warp per channel.
template <class T>
__global__ void bn_finish_statistics(const double* partial, int splits, std::int64_t rows, std::int64_t c, const T* x,
                                     std::int64_t shift_stride, const float* gamma, const float* beta, double eps,
                                     double momentum, float* running_mean, float* running_var, float* saved_mean,
                                     float* saved_inv_std, float* a, float* b) {
  const std::int64_t ch = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  if (ch >= c) return;
  double s1 = 0, s2 = 0;
  bn_sum_splits(partial, splits, c, ch, s1, s2);
  if (threadIdx.x % 32 != 0) return;
  const double shifted_mean = s1 / double(rows);
  const double mean = double(float(to_double(x[ch * shift_stride]))) + shifted_mean;
  const double biased = fmax(s2 / double(rows) - shifted_mean * shifted_mean, 0.0);
  bn_store_statistics(ch, mean, biased, rows, gamma, beta, eps, momentum, running_mean, running_var, saved_mean, saved_inv_std, a, b);
}

// Forward statistics from per-channel FP32 sums of x and x^2 (a convolution's epilogue:
// conv_options::statistics), as bn_finish_statistics does from its own partial sums. The
// variance is E[x^2] - E[x]^2 in FP64 from FP32 sums: exact enough where |mean| is not far
// above the standard deviation (a convolution's output); verify() holds it to the FP64
// reference like the other path. A thread per channel.
template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void bn_finish_from_sums(const float* sum, const float* squares, std::int64_t rows, std::int64_t c,
                                    const float* gamma, const float* beta, double eps, double momentum, float* running_mean,
                                    float* running_var, float* saved_mean, float* saved_inv_std, float* a, float* b) {
  const std::int64_t ch = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  const double mean = double(sum[ch]) / double(rows);
  const double biased = fmax(double(squares[ch]) / double(rows) - mean * mean, 0.0);
  bn_store_statistics(ch, mean, biased, rows, gamma, beta, eps, momentum, running_mean, running_var, saved_mean, saved_inv_std, a, b);
}

// Backward per-channel results: dbeta = sum(e), dgamma = sum(e (x - mean)) / std, and
// dx = e c1 + x c2 + c3. A warp per channel.
template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void bn_finish_gradients(const double* partial, int splits, std::int64_t rows, std::int64_t c,
                                           const float* gamma, const float* saved_mean, const float* saved_inv_std,
                                           float* dgamma, float* dbeta, float* c1, float* c2, float* c3) {
  const std::int64_t ch = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  if (ch >= c) return;
  double s1 = 0, s2 = 0;
  bn_sum_splits(partial, splits, c, ch, s1, s2);
  if (threadIdx.x % 32 != 0) return;
  const double inv_std = saved_inv_std[ch], mean = saved_mean[ch];
  const double dg = s2 * inv_std;
  dgamma[ch] = float(dg);
  dbeta[ch] = float(s1);
  const double k1 = double(gamma[ch]) * inv_std;
  const double k2 = -k1 * inv_std * dg / double(rows);
  c1[ch] = float(k1);
  c2[ch] = float(k2);
  c3[ch] = float(-k1 * s1 / double(rows) - k2 * mean);
}

// y = act(x a + b + z); element i is of channel (i / inner) % c (inner 1 in NHWC, H W in NCHW).
template <class T>
__global__ void bn_apply(const T* x, const T* z, T* y, const float* a, const float* b, std::int64_t count, std::int64_t c,
                         std::int64_t inner, bool relu) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ch = (i / inner) % c;
    float v = float(to_double(x[i])) * a[ch] + b[ch];
    if (z != nullptr) v += float(to_double(z[i]));
    if (relu) v = fmaxf(v, 0.0f);
    y[i] = from_double<T>(v);
  }
}

// e = relu ? (y > 0 ? g : 0) : g with g = dy (+ dy2); dz = e; dx = e c1 + x c2 + c3 (dx may be dy).
template <class T>
__global__ void bn_apply_gradient(const T* x, const T* y, const T* dy, const T* dy2, T* dx, T* dz, const float* c1, const float* c2,
                                  const float* c3, std::int64_t count, std::int64_t c, std::int64_t inner, bool relu) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ch = (i / inner) % c;
    const float e = bn_output_gradient(y, dy, dy2, i, relu);
    const float xv = float(to_double(x[i]));
    if (dz != nullptr) dz[i] = from_double<T>(e);
    dx[i] = from_double<T>(e * c1[ch] + xv * c2[ch] + c3[ch]);
  }
}

// The packed NHWC kernels (ops/packed_elements.cuh): the scalar kernels above, with 64-bit
// index arithmetic per element, ran ResNet-50's batch norms at batch 256 in TF32 in 56 ms of
// a 95 ms step on the H200. One thread per 16-byte pack of channels, 32-bit indices; the
// element-wise passes compute exactly what the scalar ones do, the sums in another order.

// bn_partial_sums_nhwc over packs. A block is `lanes` packs wide (lanes divides 256 and the
// row's packs) and 256 / lanes rows tall: blockIdx.x picks the packs, blockIdx.y the split.
// With the ReLU the backward pass reads the forward pass's mask (one bit per element, a byte
// per pack) instead of y: a sixteenth of y's bytes in FP16.
template <class T>
__host__ __device__ inline bool bn_positive(const std::uint8_t* mask, const packed<T>& y, int i, int k) {
  return mask != nullptr ? ((mask[i] >> k) & 1u) != 0 : to_float(y.v[k]) > 0.0f;
}

// One thread's share of the packed sums: rows m_first, m_first + m_step, ... of one pack of
// channels, added to s1 and s2 (callable on the host: tests/unit/packed_kernels_test.cu).
template <class T>
__host__ __device__ inline void bn_accumulate_packed(const packed<T>* x, const packed<T>* y, const std::uint8_t* mask,
                                                     const packed<T>* dy, const packed<T>* dy2, const float* mean, int rows,
                                                     int row_packs, int pack, int m_first, int m_step, bool relu,
                                                     float (&s1)[packed<T>::width], float (&s2)[packed<T>::width]) {
  constexpr int width = packed<T>::width;
  float center[width];
  if (dy == nullptr) {
    const packed<T> first = x[pack];  // the shift: row 0's value, as bn_finish_statistics reads it
    for (int k = 0; k < width; ++k) center[k] = to_float(first.v[k]);
  } else {
    for (int k = 0; k < width; ++k) center[k] = mean[pack * width + k];
  }
  for (int m = m_first; m < rows; m += m_step) {
    const int i = m * row_packs + pack;
    const packed<T> xv = x[i];
    if (dy == nullptr) {
      for (int k = 0; k < width; ++k) {
        const float d = to_float(xv.v[k]) - center[k];
        s1[k] += d;
        s2[k] += d * d;
      }
    } else {
      const packed<T> g = dy[i];
      packed<T> g2{}, yv{};
      if (dy2 != nullptr) g2 = dy2[i];
      if (relu && mask == nullptr) yv = y[i];
      for (int k = 0; k < width; ++k) {
        const float e = relu && !bn_positive(mask, yv, i, k) ? 0.0f : to_float(g.v[k]) + (dy2 != nullptr ? to_float(g2.v[k]) : 0.0f);
        s1[k] += e;
        s2[k] += e * (to_float(xv.v[k]) - center[k]);
      }
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256) bn_partial_sums_packed(const packed<T>* x, const packed<T>* y, const std::uint8_t* mask,
                                                              const packed<T>* dy, const packed<T>* dy2, const float* mean, int rows,
                                                              int row_packs, int lanes, bool relu, double* partial) {
  constexpr int width = packed<T>::width;
  const int lane = int(threadIdx.x) % lanes, tall = 256 / lanes, pack = int(blockIdx.x) * lanes + lane;
  float s1[width] = {}, s2[width] = {};
  bn_accumulate_packed(x, y, mask, dy, dy2, mean, rows, row_packs, pack, int(blockIdx.y) * tall + int(threadIdx.x) / lanes,
                       int(gridDim.y) * tall, relu, s1, s2);
  __shared__ double sums[2][width][256];
  for (int k = 0; k < width; ++k) {
    sums[0][k][threadIdx.x] = s1[k];
    sums[1][k][threadIdx.x] = s2[k];
  }
  __syncthreads();
  if (int(threadIdx.x) < lanes) {
    const int c = row_packs * width;
    for (int k = 0; k < width; ++k) {
      double t1 = 0, t2 = 0;
      for (int r = 0; r < tall; ++r) {
        t1 += sums[0][k][r * lanes + lane];
        t2 += sums[1][k][r * lanes + lane];
      }
      const std::int64_t at = (std::int64_t(blockIdx.y) * c + pack * width + k) * 2;
      partial[at] = t1;
      partial[at + 1] = t2;
    }
  }
}

// The ReLU mask of a stored pack.
template <class T>
__host__ __device__ inline std::uint8_t bn_mask_byte(const packed<T>& y) {
  unsigned bits = 0;
  for (int k = 0; k < packed<T>::width; ++k) bits |= (to_float(y.v[k]) > 0.0f ? 1u : 0u) << k;
  return std::uint8_t(bits);
}

// The mask from y where the forward pass could not take the packed kernel (y not aligned).
template <class T>
__global__ void bn_mask_from_output(const T* y, std::uint8_t* mask, int packs) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i >= packs) return;
  packed<T> p;
  for (int k = 0; k < packed<T>::width; ++k) p.v[k] = y[std::int64_t(i) * packed<T>::width + k];
  mask[i] = bn_mask_byte(p);
}

// A pack's per-channel factors (16-byte aligned: the caller checked).
template <int width>
__host__ __device__ inline void load_factors(const float* f, int first, float (&out)[width]) {
  for (int j = 0; j < width / 4; ++j) {
    const float4 v = reinterpret_cast<const float4*>(f + first)[j];
    out[4 * j] = v.x;
    out[4 * j + 1] = v.y;
    out[4 * j + 2] = v.z;
    out[4 * j + 3] = v.w;
  }
}

// bn_apply for pack i; with the ReLU and a mask, the mask too (bit k of byte i: element k of
// pack i is positive as stored). One thread's work, callable on the host too.
template <class T>
__host__ __device__ inline void bn_apply_packed_at(const packed<T>* x, const packed<T>* z, packed<T>* y, std::uint8_t* mask,
                                                   const float* a, const float* b, int row_packs, bool relu, int i) {
  constexpr int width = packed<T>::width;
  float av[width], bv[width];
  load_factors<width>(a, (i % row_packs) * width, av);
  load_factors<width>(b, (i % row_packs) * width, bv);
  const packed<T> xv = x[i];
  packed<T> zv{}, out;
  if (z != nullptr) zv = z[i];
  for (int k = 0; k < width; ++k) {
    float v = to_float(xv.v[k]) * av[k] + bv[k];
    if (z != nullptr) v += to_float(zv.v[k]);
    if (relu) v = fmaxf(v, 0.0f);
    out.v[k] = from_float<T>(v);
  }
  y[i] = out;
  if (relu && mask != nullptr) mask[i] = bn_mask_byte(out);
}

template <class T>
__global__ void bn_apply_packed(const packed<T>* x, const packed<T>* z, packed<T>* y, std::uint8_t* mask, const float* a,
                                const float* b, int packs, int row_packs, bool relu) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < packs) bn_apply_packed_at(x, z, y, mask, a, b, row_packs, relu, i);
}

// bn_apply_gradient for pack i (dx may be dy). One thread's work, callable on the host too.
template <class T>
__host__ __device__ inline void bn_apply_gradient_packed_at(const packed<T>* x, const packed<T>* y, const std::uint8_t* mask,
                                                            const packed<T>* dy, const packed<T>* dy2, packed<T>* dx, packed<T>* dz,
                                                            const float* c1, const float* c2, const float* c3, int row_packs,
                                                            bool relu, int i) {
  constexpr int width = packed<T>::width;
  float k1[width], k2[width], k3[width];
  const int first = (i % row_packs) * width;
  load_factors<width>(c1, first, k1);
  load_factors<width>(c2, first, k2);
  load_factors<width>(c3, first, k3);
  const packed<T> xv = x[i], g = dy[i];
  packed<T> g2{}, yv{}, e_out, dx_out;
  if (dy2 != nullptr) g2 = dy2[i];
  if (relu && mask == nullptr) yv = y[i];
  for (int k = 0; k < width; ++k) {
    const float e = relu && !bn_positive(mask, yv, i, k) ? 0.0f : to_float(g.v[k]) + (dy2 != nullptr ? to_float(g2.v[k]) : 0.0f);
    e_out.v[k] = from_float<T>(e);
    dx_out.v[k] = from_float<T>(e * k1[k] + to_float(xv.v[k]) * k2[k] + k3[k]);
  }
  if (dz != nullptr) dz[i] = e_out;
  dx[i] = dx_out;
}

template <class T>
__global__ void bn_apply_gradient_packed(const packed<T>* x, const packed<T>* y, const std::uint8_t* mask, const packed<T>* dy,
                                         const packed<T>* dy2, packed<T>* dx, packed<T>* dz, const float* c1, const float* c2,
                                         const float* c3, int packs, int row_packs, bool relu) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < packs) bn_apply_gradient_packed_at(x, y, mask, dy, dy2, dx, dz, c1, c2, c3, row_packs, relu, i);
}

// FP64 reference, one block of 256 per channel: mean and biased variance (two passes), and
// with dy the backward sums over e: sum(e), sum(e xhat), sum|e|, sum|e xhat|.
template <class T>
__global__ void bn_reference_channel(const T* x, const T* y, const T* dy, const T* dy2, std::int64_t rows, std::int64_t c,
                                     std::int64_t inner, double eps, bool relu, double* out /* 6 per channel */) {
  const std::int64_t ch = blockIdx.x;
  auto at = [&](std::int64_t m) { return inner == 1 ? m * c + ch : ((m / inner) * c + ch) * inner + m % inner; };
  __shared__ double red[4][256];
  auto reduce = [&](int k) {
    __syncthreads();
    for (unsigned half = 128; half > 0; half /= 2) {
      if (threadIdx.x < half) red[k][threadIdx.x] += red[k][threadIdx.x + half];
      __syncthreads();
    }
    return red[k][0];
  };
  double s = 0;
  for (std::int64_t m = threadIdx.x; m < rows; m += 256) s += to_double(x[at(m)]);
  red[0][threadIdx.x] = s;
  const double mean = reduce(0) / double(rows);
  double q = 0;
  for (std::int64_t m = threadIdx.x; m < rows; m += 256) q += (to_double(x[at(m)]) - mean) * (to_double(x[at(m)]) - mean);
  red[1][threadIdx.x] = q;
  const double var = reduce(1) / double(rows);
  const double inv_std = 1.0 / sqrt(var + eps);
  double e1 = 0, e2 = 0, a1 = 0, a2 = 0;
  if (dy != nullptr) {
    for (std::int64_t m = threadIdx.x; m < rows; m += 256) {
      const std::int64_t i = at(m);
      const double e = relu && !(to_double(y[i]) > 0) ? 0.0 : to_double(dy[i]) + (dy2 != nullptr ? to_double(dy2[i]) : 0.0);
      const double xhat = (to_double(x[i]) - mean) * inv_std;
      e1 += e;
      e2 += e * xhat;
      a1 += fabs(e);
      a2 += fabs(e * xhat);
    }
  }
  __syncthreads();
  red[0][threadIdx.x] = e1;
  red[1][threadIdx.x] = e2;
  red[2][threadIdx.x] = a1;
  red[3][threadIdx.x] = a2;
  const double r0 = reduce(0), r1 = reduce(1), r2 = reduce(2), r3 = reduce(3);
  if (threadIdx.x == 0) {
    double* o = out + ch * 6;
    o[0] = mean;
    o[1] = var;
    o[2] = r0;
    o[3] = r1;
    o[4] = r2;
    o[5] = r3;
  }
}

template <class T>
__global__ void bn_gather(const T* data, const std::int64_t* at, std::size_t count, double* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = data == nullptr ? 0.0 : to_double(data[at[i]]);
  }
}

inline int bn_grid(std::int64_t count, int threads = 256) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>((count + threads - 1) / threads, 65536)));
}

}  // namespace detail

/// One batch norm layer in training mode (see the file comment). Holds descriptors only: the
/// tensors, workspace and reserve are the caller's.
class batch_norm_training {
 public:
  /// Prepares `shape` on `handle` for `path`. Throws invalid_argument for a bad shape and
  /// unsupported when cuDNN's persistent kernels do not take it (support() says why
  /// beforehand where it can).
  batch_norm_training(cudnnHandle_t handle, const batch_norm_shape& shape, batch_norm_path path,
                      const batch_norm_options& options = {})
      : m_handle(handle), m_shape(shape), m_path(path), m_options(options) {
    if (shape.n <= 0 || shape.c <= 0 || shape.h <= 0 || shape.w <= 0) {
      throw invalid_argument("batch_norm_training: every extent must be positive, got " + shape.name());
    }
    if (shape.per_channel() < 2) throw invalid_argument("batch_norm_training: " + shape.name() + " has one value per channel");
    if (!(options.eps > 0) || !(options.momentum >= 0 && options.momentum <= 1)) {
      throw invalid_argument("batch_norm_training: eps must be positive and momentum in [0, 1]");
    }
    const std::string reason = support(shape, path);
    if (!reason.empty()) throw unsupported(reason);
    int device = 0, sms = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&device));
    GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    plan_splits(sms);
    if (path == batch_norm_path::cudnn_persistent) {
      create_cudnn_descriptors();
    } else if (relu_mask_kept()) {
      m_reserve = std::size_t(m_shape.per_channel()) * std::size_t(packed_row());  // a byte per pack
    }
  }
  batch_norm_training(const batch_norm_training&) = delete;
  batch_norm_training& operator=(const batch_norm_training&) = delete;
  batch_norm_training(batch_norm_training&&) = default;
  batch_norm_training& operator=(batch_norm_training&&) = default;

  /// "" when `path` can run `shape`, else why not. cuDNN's persistent kernels take NHWC FP16
  /// or BF16 with channels a multiple of 4, and an added tensor only with the ReLU.
  static std::string support(const batch_norm_shape& shape, batch_norm_path path) {
    if (path == batch_norm_path::gpucmp_kernels) return {};
    if (shape.layout != conv_layout::nhwc) return "cuDNN persistent batch norm: NHWC only, not " + shape.name();
    if (shape.dtype != numerics::fp16 && shape.dtype != numerics::bf16) {
      return "cuDNN persistent batch norm: FP16 or BF16 only, not " + shape.name();
    }
    if (shape.c % 4 != 0) return "cuDNN persistent batch norm: channels must be a multiple of 4 in " + shape.name();
    if (shape.residual && !shape.relu) return "cuDNN persistent batch norm: an added tensor needs the ReLU, " + shape.name();
    return {};
  }

  /// Workspace bytes forward() and backward() need (one buffer serves both).
  std::size_t workspace_bytes() const noexcept { return m_workspace; }
  /// Bytes forward() leaves for backward() beside the saved statistics: the ReLU's mask
  /// (cuDNN's, or a bit per element for gpucmp's packed kernels), so the backward pass need
  /// not read y for it. forward() and backward() need it when it is not 0.
  std::size_t reserve_bytes() const noexcept { return m_reserve; }
  /// The shape.
  const batch_norm_shape& shape() const noexcept { return m_shape; }
  /// How it runs.
  batch_norm_path path() const noexcept { return m_path; }
  /// The hyper-parameters.
  const batch_norm_options& options() const noexcept { return m_options; }
  /// "batch norm (gpucmp kernels) fp16_nhwc/n32_c64_h56_w56/bn+relu".
  std::string name() const { return std::string("batch norm (") + to_string(m_path) + ") " + m_shape.name(); }

  /// Enqueues the training-mode forward pass: y, saved statistics, running statistics.
  void forward(const batch_norm_tensors& t, void* workspace, void* reserve, cudaStream_t stream) const {
    require_forward(t, reserve);
    if (m_path == batch_norm_path::cudnn_persistent) {
      cudnn_forward(t, workspace, reserve, stream);
      return;
    }
    visit_storage(m_shape.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = static_cast<const T*>(t.x);
      double* partial = static_cast<double*>(workspace);
      float* a = reinterpret_cast<float*>(partial + 2 * m_splits * m_shape.c);
      float* b = a + m_shape.c;
      launch_partial_sums(x, static_cast<const T*>(nullptr), nullptr, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                          nullptr, partial, stream);
      detail::bn_finish_statistics<T><<<detail::bn_grid(32 * m_shape.c), 256, 0, stream>>>(
          partial, m_splits, m_shape.per_channel(), m_shape.c, x, inner(), t.gamma, t.beta, m_options.eps,
          m_options.momentum, t.running_mean, t.running_var, t.saved_mean, t.saved_inv_std, a, b);
      GPUCMP_CUDA_CHECK_LAST("batch norm statistics kernel");
      this->template apply<T>(t, a, b, reserve, stream);
    });
  }

  /// forward() from per-channel FP32 sums of x and x^2 that the convolution before it wrote
  /// in its epilogue (conv_options::statistics): no pass over x for the statistics, one to
  /// normalise. gpucmp's kernels only (cuDNN's persistent kernels take no statistics).
  void forward_from_sums(const batch_norm_tensors& t, const float* sum, const float* squares, void* workspace, void* reserve,
                         cudaStream_t stream) const {
    require_forward(t, reserve);
    require(sum != nullptr && squares != nullptr, "forward_from_sums needs the sums");
    require(m_path == batch_norm_path::gpucmp_kernels, "forward_from_sums runs gpucmp's kernels, not " + std::string(to_string(m_path)));
    visit_storage(m_shape.dtype, [&](auto zero) {
      using T = decltype(zero);
      float* a = reinterpret_cast<float*>(static_cast<double*>(workspace) + 2 * m_splits * m_shape.c);
      float* b = a + m_shape.c;
      detail::bn_finish_from_sums<<<unsigned((m_shape.c + 255) / 256), 256, 0, stream>>>(
          sum, squares, m_shape.per_channel(), m_shape.c, t.gamma, t.beta, m_options.eps, m_options.momentum, t.running_mean,
          t.running_var, t.saved_mean, t.saved_inv_std, a, b);
      GPUCMP_CUDA_CHECK_LAST("batch norm statistics from sums kernel");
      this->template apply<T>(t, a, b, reserve, stream);
    });
  }

  /// Enqueues the backward pass: dx, dgamma, dbeta and (residual) dz, from x, y, dy (+ dy2)
  /// and the statistics forward() saved.
  void backward(const batch_norm_tensors& t, void* workspace, void* reserve, cudaStream_t stream) const {
    require(t.x && t.y && t.dy && t.dx && t.gamma && t.saved_mean && t.saved_inv_std && t.dgamma && t.dbeta &&
                (!m_shape.residual || t.dz),
            "backward needs x, y, dy, dx, gamma, the saved statistics, dgamma and dbeta" +
                std::string(m_shape.residual ? " and dz" : ""));
    require(t.dy2 == nullptr || m_path == batch_norm_path::gpucmp_kernels,
            "cuDNN's path takes one output gradient: add the second to dy first");
    require(m_reserve == 0 || reserve != nullptr, "backward needs the reserve forward() filled (reserve_bytes())");
    if (m_path == batch_norm_path::cudnn_persistent) {
      cudnn_backward(t, workspace, reserve, stream);
      return;
    }
    visit_storage(m_shape.dtype, [&](auto zero) {
      using T = decltype(zero);
      double* partial = static_cast<double*>(workspace);
      float* c1 = reinterpret_cast<float*>(partial + 2 * m_splits * m_shape.c);
      float* c2 = c1 + m_shape.c;
      float* c3 = c2 + m_shape.c;
      const T* x = static_cast<const T*>(t.x);
      const T* y = static_cast<const T*>(t.y);
      const T* dy = static_cast<const T*>(t.dy);
      const T* dy2 = static_cast<const T*>(t.dy2);
      const std::uint8_t* mask = relu_mask_kept() ? static_cast<const std::uint8_t*>(reserve) : nullptr;
      launch_partial_sums(x, y, mask, dy, dy2, t.saved_mean, partial, stream);
      detail::bn_finish_gradients<><<<detail::bn_grid(32 * m_shape.c), 256, 0, stream>>>(
          partial, m_splits, m_shape.per_channel(), m_shape.c, t.gamma, t.saved_mean, t.saved_inv_std, t.dgamma, t.dbeta, c1,
          c2, c3);
      GPUCMP_CUDA_CHECK_LAST("batch norm gradient sums kernel");
      T* dx = static_cast<T*>(t.dx);
      T* dz = m_shape.residual ? static_cast<T*>(t.dz) : nullptr;
      if (const int row_packs = packed_row(); row_packs > 0 && all_packable({x, y, dy, dy2, dx, dz, c1, c2, c3})) {
        using P = packed<T>;
        const std::int64_t packs = m_shape.elements() / P::width;
        detail::bn_apply_gradient_packed<T><<<packed_blocks(packs), 256, 0, stream>>>(
            reinterpret_cast<const P*>(x), reinterpret_cast<const P*>(y), mask, reinterpret_cast<const P*>(dy),
            reinterpret_cast<const P*>(dy2), reinterpret_cast<P*>(dx), reinterpret_cast<P*>(dz), c1, c2, c3, int(packs), row_packs,
            m_shape.relu);
      } else {
        detail::bn_apply_gradient<T><<<detail::bn_grid(m_shape.elements()), 256, 0, stream>>>(
            x, y, dy, dy2, dx, dz, c1, c2, c3, m_shape.elements(), m_shape.c, inner(), m_shape.relu);
      }
      GPUCMP_CUDA_CHECK_LAST("batch norm gradient kernel");
    });
  }

  /// Runs forward() and backward() once on `t` as it is (x, z, gamma, beta and dy must hold
  /// data) and checks both at full size against an FP64 reference computed on the GPU: y,
  /// dx and dz at 16,384 random elements (first and last included), the saved and running
  /// statistics, dgamma and dbeta at every channel. The running statistics are restored
  /// afterwards. Synchronizes `stream`. With `sum` and `squares` (the per-channel sums of x
  /// a convolution's epilogue wrote) the forward pass is forward_from_sums(), so the check
  /// also holds those sums to x's statistics.
  batch_norm_verification verify(const batch_norm_tensors& t, void* workspace, void* reserve, cudaStream_t stream,
                                 const float* sum = nullptr, const float* squares = nullptr) const {
    const std::size_t c = std::size_t(m_shape.c);
    const std::vector<float> old_mean = download(t.running_mean, c, stream), old_var = download(t.running_var, c, stream);
    const std::size_t bytes = std::size_t(m_shape.elements()) * activation_bytes(m_shape.dtype);
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(t.y, 0xFF, bytes, stream));  // poisoned: NaN in every type
    if (sum != nullptr || squares != nullptr) {
      forward_from_sums(t, sum, squares, workspace, reserve, stream);
    } else {
      forward(t, workspace, reserve, stream);
    }
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(t.dx, 0xFF, bytes, stream));
    if (m_shape.residual) GPUCMP_CUDA_CHECK(cudaMemsetAsync(t.dz, 0xFF, bytes, stream));
    // dx may be dy itself; the reference needs dy, so the check runs on a copy.
    device_buffer<unsigned char> dy_copy(bytes, initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(dy_copy.data(), t.dy, bytes, cudaMemcpyDeviceToDevice, stream));
    batch_norm_tensors b = t;
    b.dy = dy_copy.data();
    backward(b, workspace, reserve, stream);
    batch_norm_verification v = visit_storage(m_shape.dtype, [&](auto zero) {
      using T = decltype(zero);
      return compare<T>(b, old_mean, old_var, sum != nullptr, stream);
    });
    upload(t.running_mean, old_mean, stream);
    upload(t.running_var, old_var, stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

 private:
  using tensor_desc_t = detail::unique_handle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
  using activation_desc_t = detail::unique_handle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

  void require(bool ok, const std::string& what) const {
    if (!ok) throw invalid_argument(name() + ": " + what);
  }
  std::int64_t inner() const noexcept { return m_shape.layout == conv_layout::nhwc ? 1 : m_shape.h * m_shape.w; }

  // Packs per row when the shape takes the packed kernels (NHWC, channels in whole packs,
  // 32-bit indices), else 0. The pointers are checked at each launch.
  int packed_row() const noexcept {
    if (m_shape.layout != conv_layout::nhwc) return 0;
    const std::int64_t width = 16 / std::int64_t(activation_bytes(m_shape.dtype));
    // Half of int's range: a thread's index or next row never overflows.
    if (m_shape.c % width != 0 || m_shape.elements() / width > std::numeric_limits<int>::max() / 2) return 0;
    return int(m_shape.c / width);
  }
  // gpucmp's path keeps the ReLU's mask where the shape takes the packed kernels.
  bool relu_mask_kept() const noexcept {
    return m_path == batch_norm_path::gpucmp_kernels && m_shape.relu && packed_row() > 0;
  }
  // The packed sums kernel's block: `lanes` packs wide, 256 / lanes rows tall.
  int packed_lanes() const noexcept { return std::gcd(packed_row(), 256); }

  // Row splits so the partial-sum kernel has several blocks per SM (the packed kernel eight,
  // to keep enough bytes in flight), each thread at least 16 rows.
  void plan_splits(int sms) {
    const std::int64_t rows = m_shape.per_channel();
    const bool packed = packed_row() > 0;
    const std::int64_t channel_blocks =
        packed ? packed_row() / packed_lanes() : m_shape.layout == conv_layout::nhwc ? (m_shape.c + 31) / 32 : m_shape.c;
    const std::int64_t rows_per_split_pass = packed ? 256 / packed_lanes() : m_shape.layout == conv_layout::nhwc ? 8 : 256;
    const std::int64_t blocks_per_sm = packed ? 8 : 4;
    const std::int64_t wanted =
        std::max<std::int64_t>(1, (blocks_per_sm * std::int64_t(sms) + channel_blocks - 1) / channel_blocks);
    const std::int64_t most = std::max<std::int64_t>(1, rows / (16 * rows_per_split_pass));
    m_splits = int(std::min<std::int64_t>({wanted, most, 65535}));
    m_workspace = std::size_t(2 * m_splits * m_shape.c) * sizeof(double) + std::size_t(3 * m_shape.c) * sizeof(float);
  }

  // mask: the forward pass's ReLU mask (packed kernels only; null: read y).
  template <class T>
  void launch_partial_sums(const T* x, const T* y, const std::uint8_t* mask, const T* dy, const T* dy2, const float* mean,
                           double* partial, cudaStream_t stream) const {
    const int row_packs = packed_row();
    if (row_packs > 0 && all_packable({x, y, dy, dy2})) {
      using P = packed<T>;
      const int lanes = packed_lanes();
      const dim3 grid(unsigned(row_packs / lanes), unsigned(m_splits));
      detail::bn_partial_sums_packed<T><<<grid, 256, 0, stream>>>(
          reinterpret_cast<const P*>(x), reinterpret_cast<const P*>(y), mask, reinterpret_cast<const P*>(dy),
          reinterpret_cast<const P*>(dy2), mean, int(m_shape.per_channel()), row_packs, lanes, m_shape.relu, partial);
    } else if (m_shape.layout == conv_layout::nhwc) {
      const dim3 grid(unsigned((m_shape.c + 31) / 32), unsigned(m_splits));
      detail::bn_partial_sums_nhwc<T><<<grid, dim3(32, 8), 0, stream>>>(x, y, dy, dy2, mean, m_shape.per_channel(), m_shape.c,
                                                                       m_shape.relu, partial);
    } else {
      const dim3 grid(unsigned(m_shape.c), unsigned(m_splits));
      detail::bn_partial_sums_nchw<T><<<grid, 256, 0, stream>>>(x, y, dy, dy2, mean, m_shape.per_channel(), m_shape.c,
                                                               m_shape.h * m_shape.w, m_shape.relu, partial);
    }
    GPUCMP_CUDA_CHECK_LAST("batch norm partial sums kernel");
  }

  cudnnBatchNormOps_t cudnn_ops() const noexcept {
    if (m_shape.residual) return CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
    return m_shape.relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
  }

  void create_cudnn_descriptors() {
    cudnnTensorDescriptor_t x = nullptr, p = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    m_x = tensor_desc_t(x);
    GPUCMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p));
    m_param = tensor_desc_t(p);
    GPUCMP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, detail::cudnn_data_type(types_of(m_shape.dtype).output), int(m_shape.n),
                                                  int(m_shape.c), int(m_shape.h), int(m_shape.w)));
    GPUCMP_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p, x, CUDNN_BATCHNORM_SPATIAL_PERSISTENT));
    if (m_shape.relu) {
      cudnnActivationDescriptor_t a = nullptr;
      GPUCMP_CUDNN_CHECK(cudnnCreateActivationDescriptor(&a));
      m_activation = activation_desc_t(a);
      GPUCMP_CUDNN_CHECK(cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    }
    std::size_t forward_ws = 0, backward_ws = 0, reserve = 0;
    const cudnnTensorDescriptor_t z = m_shape.residual ? m_x.get() : nullptr;
    const cudnnStatus_t s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        m_handle, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, cudnn_ops(), m_x.get(), z, m_x.get(), m_param.get(), m_activation.get(),
        &forward_ws);
    if (s == CUDNN_STATUS_NOT_SUPPORTED) throw unsupported("cuDNN persistent batch norm does not take " + m_shape.name());
    GPUCMP_CUDNN_CHECK(s);
    GPUCMP_CUDNN_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        m_handle, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, cudnn_ops(), m_x.get(), m_x.get(), m_x.get(), z, m_x.get(), m_param.get(),
        m_activation.get(), &backward_ws));
    GPUCMP_CUDNN_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
        m_handle, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, cudnn_ops(), m_activation.get(), m_x.get(), &reserve));
    m_workspace = std::max(forward_ws, backward_ws);
    m_reserve = reserve;
  }

  void require_forward(const batch_norm_tensors& t, void* reserve) const {
    require(t.x && t.y && t.gamma && t.beta && t.running_mean && t.running_var && t.saved_mean && t.saved_inv_std &&
                (!m_shape.residual || t.z),
            "forward needs x, y, gamma, beta, the running and saved statistics" + std::string(m_shape.residual ? " and z" : ""));
    require(m_reserve == 0 || reserve != nullptr, "forward needs the reserve (reserve_bytes())");
  }

  // y = act(x a + b (+ z)), and the ReLU's mask in the reserve where it is kept.
  template <class T>
  void apply(const batch_norm_tensors& t, const float* a, const float* b, void* reserve, cudaStream_t stream) const {
    const T* x = static_cast<const T*>(t.x);
    const T* z = m_shape.residual ? static_cast<const T*>(t.z) : nullptr;
    T* y = static_cast<T*>(t.y);
    std::uint8_t* mask = relu_mask_kept() ? static_cast<std::uint8_t*>(reserve) : nullptr;
    if (const int row_packs = packed_row(); row_packs > 0 && all_packable({x, z, y, a, b})) {
      using P = packed<T>;
      const std::int64_t packs = m_shape.elements() / P::width;
      detail::bn_apply_packed<T><<<packed_blocks(packs), 256, 0, stream>>>(
          reinterpret_cast<const P*>(x), reinterpret_cast<const P*>(z), reinterpret_cast<P*>(y), mask, a, b, int(packs), row_packs,
          m_shape.relu);
    } else {
      detail::bn_apply<T><<<detail::bn_grid(m_shape.elements()), 256, 0, stream>>>(x, z, y, a, b, m_shape.elements(), m_shape.c,
                                                                                inner(), m_shape.relu);
      if (mask != nullptr) {
        GPUCMP_CUDA_CHECK_LAST("batch norm apply kernel");
        const std::int64_t packs = m_shape.elements() / packed<T>::width;
        detail::bn_mask_from_output<T><<<packed_blocks(packs), 256, 0, stream>>>(y, mask, int(packs));
        GPUCMP_CUDA_CHECK_LAST("batch norm ReLU mask kernel");
        return;
      }
    }
    GPUCMP_CUDA_CHECK_LAST("batch norm apply kernel");
  }

  void cudnn_forward(const batch_norm_tensors& t, void* workspace, void* reserve, cudaStream_t stream) const {
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle, stream));
    const float one = 1.0f, zero = 0.0f;
    GPUCMP_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
        m_handle, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, cudnn_ops(), &one, &zero, m_x.get(), t.x,
        m_shape.residual ? m_x.get() : nullptr, m_shape.residual ? t.z : nullptr, m_x.get(), t.y, m_param.get(), t.gamma, t.beta,
        m_options.momentum, t.running_mean, t.running_var, m_options.eps, t.saved_mean, t.saved_inv_std, m_activation.get(),
        workspace, m_workspace, reserve, m_reserve));
  }

  void cudnn_backward(const batch_norm_tensors& t, void* workspace, void* reserve, cudaStream_t stream) const {
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle, stream));
    const float one = 1.0f, zero = 0.0f;
    GPUCMP_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
        m_handle, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, cudnn_ops(), &one, &zero, &one, &zero, m_x.get(), t.x, m_x.get(), t.y,
        m_x.get(), t.dy, m_shape.residual ? m_x.get() : nullptr, m_shape.residual ? t.dz : nullptr, m_x.get(), t.dx,
        m_param.get(), t.gamma, t.beta, t.dgamma, t.dbeta, m_options.eps, t.saved_mean, t.saved_inv_std, m_activation.get(),
        workspace, m_workspace, reserve, m_reserve));
  }

  static std::vector<float> download(const float* p, std::size_t n, cudaStream_t stream) {
    std::vector<float> v(n);
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }
  static void upload(float* p, const std::vector<float>& v, cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // Where element i of the NHWC/NCHW tensor is, as "n 3, c 17, h 5, w 9".
  std::string where(std::int64_t i) const {
    std::int64_t n, ch, h, w;
    if (m_shape.layout == conv_layout::nhwc) {
      ch = i % m_shape.c;
      w = (i / m_shape.c) % m_shape.w;
      h = (i / (m_shape.c * m_shape.w)) % m_shape.h;
      n = i / (m_shape.c * m_shape.w * m_shape.h);
    } else {
      w = i % m_shape.w;
      h = (i / m_shape.w) % m_shape.h;
      ch = (i / (m_shape.w * m_shape.h)) % m_shape.c;
      n = i / (m_shape.w * m_shape.h * m_shape.c);
    }
    return "n " + std::to_string(n) + ", c " + std::to_string(ch) + ", h " + std::to_string(h) + ", w " + std::to_string(w);
  }

  template <class T>
  batch_norm_verification compare(const batch_norm_tensors& t, const std::vector<float>& old_mean,
                                  const std::vector<float>& old_var, bool from_sums, cudaStream_t stream) const {
    const std::size_t c = std::size_t(m_shape.c);
    const std::int64_t count = m_shape.elements(), rows = m_shape.per_channel();
    // Per-channel reference statistics and backward sums (the ReLU mask from the layer's own y).
    device_buffer<double> channel(6 * c, initial_fill::uninitialized());
    detail::bn_reference_channel<T><<<unsigned(c), 256, 0, stream>>>(static_cast<const T*>(t.x), static_cast<const T*>(t.y),
                                                                   static_cast<const T*>(t.dy), static_cast<const T*>(t.dy2), rows,
                                                                   m_shape.c, inner(),
                                                                   m_options.eps, m_shape.relu, channel.data());
    GPUCMP_CUDA_CHECK_LAST("batch norm reference kernel");
    // Sampled elements: first, last and random ones.
    std::vector<std::int64_t> at{0, count - 1};
    const std::int64_t samples = std::min<std::int64_t>(count, 16384);
    for (std::int64_t k = 2; k < samples; ++k) at.push_back(std::int64_t(random_bits(0xB4, std::uint64_t(k)) % std::uint64_t(count)));
    if (count <= 16384) {
      at.clear();
      for (std::int64_t i = 0; i < count; ++i) at.push_back(i);
    }
    device_buffer<std::int64_t> at_d(at.size(), initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(at_d.data(), at.data(), at.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
    const void* sources[] = {t.x, m_shape.residual ? t.z : nullptr, t.y, t.dy, t.dx, m_shape.residual ? t.dz : nullptr, t.dy2};
    std::vector<std::vector<double>> got(7, std::vector<double>(at.size()));
    device_buffer<double> gathered(at.size(), initial_fill::uninitialized());
    for (int k = 0; k < 7; ++k) {
      detail::bn_gather<T><<<detail::bn_grid(std::int64_t(at.size())), 256, 0, stream>>>(static_cast<const T*>(sources[k]),
                                                                                         at_d.data(), at.size(), gathered.data());
      GPUCMP_CUDA_CHECK_LAST("batch norm gather kernel");
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(got[k].data(), gathered.data(), at.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
    }
    std::vector<double> ref(6 * c);
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(ref.data(), channel.data(), ref.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
    const std::vector<float> gamma = download(t.gamma, c, stream), beta = download(t.beta, c, stream);
    const std::vector<float> mean = download(t.saved_mean, c, stream), inv_std = download(t.saved_inv_std, c, stream);
    const std::vector<float> run_mean = download(t.running_mean, c, stream), run_var = download(t.running_var, c, stream);
    const std::vector<float> dgamma = download(t.dgamma, c, stream), dbeta = download(t.dbeta, c, stream);

    // Statistics and per-channel results come from FP32 partial sums (2^-16 relative covers
    // thousands of terms per thread); element-wise results are a few FP32 operations on
    // them, then rounded to their type.
    const double stats_eps = std::ldexp(1.0, -16), f32 = std::ldexp(1.0, -18), out_eps = unit_roundoff(types_of(m_shape.dtype).output);
    // cuDNN's persistent kernels sum the backward's per-channel terms in an order and precision
    // of their own (not documented): on the H200, FP16 dbeta was off FP64 by 1.1e-4 of the sum
    // of |dy| (ResNet-50 layer3.3.conv3 at batch 128), so that path's sums are held to the storage
    // type's epsilon rather than FP32 partial sums'.
    const double sum_eps = m_path == batch_norm_path::cudnn_persistent ? std::max(stats_eps, out_eps) : stats_eps;
    const double small = m_shape.dtype == numerics::fp16 ? std::ldexp(1.0, -24) : m_shape.dtype == numerics::bf16 ? 1e-38 : 1e-44;
    batch_norm_verification v;
    v.forward.method = "GPU FP64 reference: statistics of every channel, y at " + std::to_string(at.size()) + " elements";
    v.backward.method = "GPU FP64 reference: dgamma and dbeta of every channel, dx" + std::string(m_shape.residual ? " and dz" : "") +
                        " at " + std::to_string(at.size()) + " elements";
    const double m = double(options().momentum);
    // forward_from_sums(): the convolution summed y before rounding it to x's type, so the
    // statistics may differ from x's by that rounding, at worst (every rounding one way)
    // |d mean| <= u/2 sqrt(E[x^2]) and |d var| <= 2 u E[x^2]; per channel, as a relative
    // error of 1/std (rho) and a shift of x-hat (shift), carried into y, dgamma and dx.
    std::vector<double> rho(c, 0.0), shift(c, 0.0);
    for (std::size_t ch = 0; from_sums && ch < c; ++ch) {
      const double* r = &ref[6 * ch];
      const double squares = r[1] + r[0] * r[0];
      rho[ch] = out_eps * squares / (r[1] + m_options.eps);
      shift[ch] = out_eps / 2 * std::sqrt(squares / (r[1] + m_options.eps));
    }
    for (std::size_t ch = 0; ch < c; ++ch) {
      const double* r = &ref[6 * ch];
      const double ref_inv_std = 1.0 / std::sqrt(r[1] + m_options.eps);
      const double d_mean = shift[ch] / ref_inv_std, d_var = 2 * rho[ch] * (r[1] + m_options.eps);
      const std::string tag = "channel " + std::to_string(ch);
      v.forward.add(mean[ch], r[0], stats_eps * (std::fabs(r[0]) + std::sqrt(r[1])) + d_mean, tag + " saved mean");
      v.forward.add(inv_std[ch], ref_inv_std, (stats_eps + rho[ch]) * ref_inv_std, tag + " saved 1/std");
      v.forward.add(run_mean[ch], (1 - m) * old_mean[ch] + m * r[0],
                    stats_eps * (std::fabs(old_mean[ch]) + std::fabs(r[0]) + std::sqrt(r[1])) + m * d_mean, tag + " running mean");
      v.forward.add(run_var[ch], (1 - m) * old_var[ch] + m * r[1] * double(rows) / double(rows - 1),
                    stats_eps * (std::fabs(old_var[ch]) + r[1] * 2) + m * d_var * double(rows) / double(rows - 1),
                    tag + " running variance");
      v.backward.add(dbeta[ch], r[2], sum_eps * r[4] + 1e-30, tag + " dbeta");
      v.backward.add(dgamma[ch], r[3], sum_eps * (r[5] + r[4]) + rho[ch] * r[5] + shift[ch] * r[4] + 1e-30, tag + " dgamma");
    }
    for (std::size_t k = 0; k < at.size(); ++k) {
      const std::int64_t i = at[k];
      const std::size_t ch = std::size_t(m_shape.layout == conv_layout::nhwc ? i % m_shape.c : (i / inner()) % m_shape.c);
      const double* r = &ref[6 * ch];
      const double ref_inv_std = 1.0 / std::sqrt(r[1] + m_options.eps);
      const double x = got[0][k], z = got[1][k], y = got[2][k], dy = got[3][k] + got[6][k], dx = got[4][k], dz = got[5][k];
      const double xhat = (x - r[0]) * ref_inv_std;
      double pre = gamma[ch] * xhat + beta[ch] + (m_shape.residual ? z : 0.0);
      const double y_ref = m_shape.relu ? std::max(pre, 0.0) : pre;
      // x a + b with a and b from the statistics: their error times |x| and |mean|.
      const double xhat_error = rho[ch] * std::fabs(xhat) + shift[ch];  // 0 unless from the sums
      const double y_scale = std::fabs(gamma[ch]) * ref_inv_std * (std::fabs(x) + std::fabs(r[0])) * stats_eps +
                             std::fabs(gamma[ch]) * xhat_error +
                             f32 * (std::fabs(gamma[ch]) * (std::fabs(xhat) + 1) + std::fabs(beta[ch]) + std::fabs(z));
      v.forward.add(y, y_ref, out_eps * std::fabs(y_ref) + y_scale + small, where(i) + " y");
      // The backward reference uses the layer's own y for the ReLU's mask (as torch does).
      const double e = m_shape.relu && !(y > 0) ? 0.0 : dy;
      const double k1 = gamma[ch] * ref_inv_std;
      const double dx_ref = k1 * (e - r[2] / double(rows) - xhat * r[3] / double(rows));
      // e c1 + x c2 + c3: c2 and c3 carry the sums' error, and x c2 + c3 cancels to (x - mean) c2.
      const double sums = (r[4] + (std::fabs(xhat) + (std::fabs(x) + std::fabs(r[0])) * ref_inv_std) * r[5]) / double(rows);
      // From the sums: 1/std off by rho (k1 and x-hat), x-hat by xhat_error, and the
      // gradient sum over x-hat by rho r5 + shift r4 (no division by k1: gamma may be 0).
      const double from_sums_error = rho[ch] * std::fabs(dx_ref) +
                                     std::fabs(k1) * (xhat_error * std::fabs(r[3]) + std::fabs(xhat) * (rho[ch] * r[5] + shift[ch] * r[4])) /
                                         double(rows);
      const double dx_scale = std::fabs(k1) * (f32 * std::fabs(e) + sum_eps * sums) + from_sums_error;
      v.backward.add(dx, dx_ref, out_eps * std::fabs(dx_ref) + dx_scale + small, where(i) + " dx");
      if (m_shape.residual) v.backward.add(dz, e, out_eps * std::fabs(e) + small, where(i) + " dz");
    }
    return v;
  }

  cudnnHandle_t m_handle;
  batch_norm_shape m_shape;
  batch_norm_path m_path;
  batch_norm_options m_options;
  int m_splits = 1;
  std::size_t m_workspace = 0, m_reserve = 0;
  tensor_desc_t m_x, m_param;
  activation_desc_t m_activation;
};

}  // namespace gpucmp
