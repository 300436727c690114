// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The training loss: mean softmax cross-entropy of FP32 logits against integer labels, and
// its gradient, in one pass per row. The gradient is multiplied by the loss scale (a device
// value, training/loss_scale.cuh) so mixed-precision backward passes stay in range, and
// written in the activations' type; the loss itself is reported unscaled. The batch mean is
// summed in a fixed order (no atomics), so a step's loss is the same bit for bit every run.
// Nothing synchronises the host: the loss lives in a CUDA graph with the rest of a step.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/softmax.cuh>  // detail::block_reduce
#include <gpucmp/ops/elements.cuh>

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cstdint>
#include <string>

namespace gpucmp {

namespace detail {

// One block per row (blockDim a multiple of 32, at most 1024): the row's loss into
// row_loss[row] and dlogits = scale (softmax - one_hot) / rows. A label outside the classes
// makes the row's loss and gradient NaN (the step is then skipped or visibly wrong).
template <class G>
__global__ void softmax_cross_entropy_rows(const float* logits, const std::int32_t* labels, std::int64_t classes,
                                           std::int64_t rows, const float* scale, G* dlogits, double* row_loss) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float top = -FLT_MAX;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) top = fmaxf(top, x[k]);
  top = block_reduce(top, true, scratch);
  float sum = 0;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) sum += expf(x[k] - top);
  sum = block_reduce(sum, false, scratch);
  const std::int32_t label = labels[row];
  const bool valid = label >= 0 && label < classes;
  const float factor = (scale != nullptr ? *scale : 1.0f) / float(rows);
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    const float p = expf(x[k] - top) / sum;
    const float g = valid ? (p - (k == label ? 1.0f : 0.0f)) * factor : NAN;
    dlogits[row * classes + k] = from_double<G>(g);
  }
  if (threadIdx.x == 0) row_loss[row] = valid ? double(logf(sum)) + double(top) - double(x[label]) : NAN;
}

// The mean of the rows' losses over *count (null: over the rows), in one block, in a fixed order.
template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void mean_of_rows(const double* row_loss, std::int64_t rows, const float* count, float* loss) {
  __shared__ double part[256];
  double s = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = float(part[0] / (count != nullptr ? double(*count) : double(rows)));
}

}  // namespace detail

/// Enqueues the mean softmax cross-entropy of `logits` (rows x classes, FP32, row-major)
/// against `labels` (rows, int32, device) on `stream`: *loss (device) gets the unscaled mean,
/// `dlogits` (rows x classes, type G) the gradient of the loss times *scale (device; null
/// means 1). `row_loss` is scratch of `rows` doubles.
template <class G>
void softmax_cross_entropy(const float* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                           const float* scale, G* dlogits, float* loss, double* row_loss, cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) {
    throw invalid_argument("softmax_cross_entropy: rows and classes must be positive, got " + std::to_string(rows) + " x " +
                           std::to_string(classes));
  }
  if (rows > 2147483647) throw invalid_argument("softmax_cross_entropy: more than 2^31 rows");
  const int threads = classes >= 1024 ? 1024 : int((classes + 31) / 32 * 32);
  detail::softmax_cross_entropy_rows<G><<<unsigned(rows), threads, 0, stream>>>(logits, labels, classes, rows, scale, dlogits,
                                                                               row_loss);
  GPUCMP_CUDA_CHECK_LAST("softmax cross-entropy kernel");
  detail::mean_of_rows<><<<1, 256, 0, stream>>>(row_loss, rows, nullptr, loss);
  GPUCMP_CUDA_CHECK_LAST("loss mean kernel");
}

}  // namespace gpucmp
