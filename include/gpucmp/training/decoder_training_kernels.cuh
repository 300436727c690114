// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The kernels of a decoder training step that are no verified operation of their own (the
// step checks them as a whole against training/decoder_reference.hpp):
//   - RMSNorm's backward: the data gradient (one block a row, the residual stream's gradient
//     added) and the weight gradient (column sums over chunks of rows, then over the chunks in
//     a fixed order: no atomics, the same bits every run);
//   - the embedding's backward, each token's gradient row added to its id's row (FP32
//     atomics: a token id may repeat within a batch);
//   - the mean cross-entropy of BF16/FP16 logits against labels (Hugging Face's -100: none),
//     an online softmax a row, its gradient written over the logits;
//   - AdamW on flat FP32 buffers (master weights, gradients, two moments) in one pass, which
//     also writes the 16-bit copy the next step's passes read; the step count lives on the
//     device, so a captured step replays as a whole.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/block_reduce.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/vector_access.cuh>
#include <gpucmp/training/adamw.hpp>
#include <gpucmp/training/loss.cuh>  // detail::mean_of_rows

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

namespace gpucmp {

/// Rows of the RMSNorm weight gradient's first pass: each chunk of this many rows sums into
/// one partial row (decoder_rmsnorm_partials() partial rows in all).
inline constexpr std::int64_t rmsnorm_gradient_chunk = 64;

/// Partial rows the RMSNorm weight gradient of `tokens` rows needs (its scratch: that many
/// rows of hidden FP32 values).
inline std::int64_t decoder_rmsnorm_partials(std::int64_t tokens) noexcept {
  return (tokens + rmsnorm_gradient_chunk - 1) / rmsnorm_gradient_chunk;
}

namespace detail {

// dx = r w dy - x r^3 / n sum_j(w_j dy_j x_j) (+ carry): one block a row, 16-byte vectors.
template <class T>
__global__ void rmsnorm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                        const float* __restrict__ inv_rms, const T* __restrict__ carry, T* __restrict__ dx,
                                        int hidden) {
  constexpr int V = vector_elements<T>;
  const std::size_t base = std::size_t(blockIdx.x) * std::size_t(hidden);
  const float r = inv_rms[blockIdx.x];
  float dot = 0;
  for (int col = int(threadIdx.x) * V; col < hidden; col += int(blockDim.x) * V) {
    float g[V], a[V], s[V];
    load_vector(dy + base + col, g);
    load_vector(x + base + col, a);
    load_vector(w + col, s);
#pragma unroll
    for (int e = 0; e < V; ++e) dot += s[e] * g[e] * a[e];
  }
  const float c = r * r * r * block_sum(dot) / float(hidden);
  for (int col = int(threadIdx.x) * V; col < hidden; col += int(blockDim.x) * V) {
    float g[V], a[V], s[V], out[V];
    load_vector(dy + base + col, g);
    load_vector(x + base + col, a);
    load_vector(w + col, s);
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = r * s[e] * g[e] - a[e] * c;
    if (carry != nullptr) {
      float k[V];
      load_vector(carry + base + col, k);
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] += k[e];
    }
    store_vector(dx + base + col, out);
  }
}

// partial[chunk][col] = sum over the chunk's rows of dy x r: blockIdx.y the chunk, a thread a column.
template <class T>
__global__ void rmsnorm_weight_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ inv_rms,
                                               std::int64_t tokens, int hidden, float* __restrict__ partial) {
  const int col = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (col >= hidden) return;
  const std::int64_t first = std::int64_t(blockIdx.y) * rmsnorm_gradient_chunk;
  const std::int64_t last = first + rmsnorm_gradient_chunk < tokens ? first + rmsnorm_gradient_chunk : tokens;
  float sum = 0;
  for (std::int64_t t = first; t < last; ++t) {
    const std::size_t at = std::size_t(t) * std::size_t(hidden) + std::size_t(col);
    sum += to_float(dy[at]) * to_float(x[at]) * inv_rms[t];
  }
  partial[std::size_t(blockIdx.y) * std::size_t(hidden) + std::size_t(col)] = sum;
}

// dw[col] = the chunks' partial sums, in chunk order.
__global__ inline void sum_partials_kernel(const float* __restrict__ partial, std::int64_t chunks, int hidden, float* __restrict__ dw) {
  const int col = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (col >= hidden) return;
  float sum = 0;
  for (std::int64_t k = 0; k < chunks; ++k) sum += partial[std::size_t(k) * std::size_t(hidden) + std::size_t(col)];
  dw[col] = sum;
}

template <class T>
__global__ void embedding_backward_kernel(const T* __restrict__ dx, const std::int32_t* __restrict__ tokens, std::int64_t count,
                                          std::int64_t hidden, float* __restrict__ d_embedding) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * hidden) return;
  const std::int64_t t = i / hidden, col = i % hidden;
  atomicAdd(d_embedding + std::int64_t(tokens[t]) * hidden + col, to_float(dx[i]));
}

// *count = tokens whose label is not -100 (one block).
__global__ inline void count_labels_kernel(const std::int32_t* labels, std::int64_t rows, float* count) {
  float n = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) n += labels[r] != -100 ? 1.0f : 0.0f;
  n = block_sum(n);
  if (threadIdx.x == 0) *count = n;
}

// (max, sum of exp(x - max)) of two parts of a row, merged.
__device__ inline void merge_softmax(float& top, float& sum, float other_top, float other_sum) {
  const float merged = fmaxf(top, other_top);
  sum = (top == -FLT_MAX ? 0.0f : sum * __expf(top - merged)) + (other_top == -FLT_MAX ? 0.0f : other_sum * __expf(other_top - merged));
  top = merged;
}

// One block a row: the row's log-sum-exp in one pass (each thread's running max and sum,
// merged over the block), then dlogits = (softmax - one_hot) / count over the logits. A row
// without a label gets a zero gradient and no loss; a label outside [0, vocab) makes the
// loss NaN (a visibly wrong step, as a wrong index would be).
template <class T>
__global__ void cross_entropy_rows_kernel(T* logits, const std::int32_t* __restrict__ labels, std::int64_t vocab,
                                          const float* __restrict__ count, double* __restrict__ row_loss) {
  __shared__ float tops[32], sums[32];
  const std::int64_t row = blockIdx.x;
  T* x = logits + row * vocab;
  float top = -FLT_MAX, sum = 0;
  for (std::int64_t k = threadIdx.x; k < vocab; k += blockDim.x) {  // one exponential an element
    const float v = to_float(x[k]);
    if (v > top) {
      sum = sum * __expf(top - v) + 1.0f;
      top = v;
    } else {
      sum += __expf(v - top);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float t = __shfl_xor_sync(0xffffffffu, top, offset), s = __shfl_xor_sync(0xffffffffu, sum, offset);
    merge_softmax(top, sum, t, s);
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  if (lane == 0) {
    tops[warp] = top;
    sums[warp] = sum;
  }
  __syncthreads();
  top = -FLT_MAX;
  sum = 0;
  for (int w = 0; w < warps; ++w) merge_softmax(top, sum, tops[w], sums[w]);
  const std::int32_t label = labels[row];
  const bool counted = label != -100, valid = label >= 0 && label < vocab;
  if (threadIdx.x == 0) {
    row_loss[row] = !counted ? 0.0 : valid ? double(top) + std::log(double(sum)) - double(to_float(x[label])) : double(NAN);
  }
  __syncthreads();  // thread 0 read x[label] before it is overwritten
  const float factor = counted ? 1.0f / *count : 0.0f, inverse = 1.0f / sum;
  for (std::int64_t k = threadIdx.x; k < vocab; k += blockDim.x) {
    const float p = __expf(to_float(x[k]) - top) * inverse;
    x[k] = from_float<T>((p - (k == label ? 1.0f : 0.0f)) * factor);
  }
}

struct adamw_constants {
  float lr, beta1, beta2, eps, weight_decay;
};

// torch.optim.AdamW's update (training/adamw.hpp) of 4 parameters a thread at step *step + 1.
template <class T>
__global__ void adamw_kernel(float4* __restrict__ param, const float4* __restrict__ grad, float4* __restrict__ m,
                             float4* __restrict__ v, T* __restrict__ copy, std::int64_t quads, const std::int64_t* __restrict__ step,
                             adamw_constants c) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= quads) return;
  const float t = float(*step + 1);
  const float correction1 = 1.0f - powf(c.beta1, t), root2 = sqrtf(1.0f - powf(c.beta2, t));
  const float step_size = c.lr / correction1, decay = 1.0f - c.lr * c.weight_decay;
  float4 p = param[i], mi = m[i], vi = v[i];
  const float4 g = grad[i];
  float* pp = &p.x;
  float* mm = &mi.x;
  float* vv = &vi.x;
  const float* gg = &g.x;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    pp[e] *= decay;
    mm[e] = c.beta1 * mm[e] + (1.0f - c.beta1) * gg[e];
    vv[e] = c.beta2 * vv[e] + (1.0f - c.beta2) * gg[e] * gg[e];
    pp[e] -= step_size * mm[e] / (sqrtf(vv[e]) / root2 + c.eps);
    copy[4 * i + e] = from_float<T>(pp[e]);
  }
  param[i] = p;
  m[i] = mi;
  v[i] = vi;
}

__global__ inline void advance_step_kernel(std::int64_t* step) { *step += 1; }

template <class T>
__global__ void round_copy_kernel(const float* __restrict__ from, T* __restrict__ to, std::int64_t count) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) to[i] = from_float<T>(from[i]);
}

}  // namespace detail

/// Enqueues RMSNorm's data gradient: dx (tokens x hidden) from dy, the norm's input x, its
/// weight w and each row's 1/rms, plus `carry` (the residual stream's gradient; may be null).
/// dx may be carry (added in place).
template <class T>
void rmsnorm_backward(const T* dy, const T* x, const T* w, const float* inv_rms, const T* carry, T* dx, std::int64_t tokens,
                      std::int64_t hidden, cudaStream_t stream) {
  if (tokens <= 0 || hidden <= 0 || hidden % vector_elements<T> != 0 || tokens > 2147483647) {
    throw invalid_argument("rmsnorm_backward: " + std::to_string(tokens) + " rows of " + std::to_string(hidden) +
                           " (rows must be whole 16-byte vectors)");
  }
  const int threads = hidden / vector_elements<T> >= 512 ? 512 : 128;
  detail::rmsnorm_backward_kernel<T><<<unsigned(tokens), unsigned(threads), 0, stream>>>(dy, x, w, inv_rms, carry, dx, int(hidden));
  GPUCMP_CUDA_CHECK_LAST("rmsnorm_backward kernel");
}

/// Enqueues RMSNorm's weight gradient, dw[c] = sum_t dy[t, c] x[t, c] / rms_t, written (not
/// added) in FP32; `partial` is scratch of decoder_rmsnorm_partials(tokens) x hidden floats.
template <class T>
void rmsnorm_weight_gradient(const T* dy, const T* x, const float* inv_rms, std::int64_t tokens, std::int64_t hidden, float* partial,
                             float* dw, cudaStream_t stream) {
  const std::int64_t chunks = decoder_rmsnorm_partials(tokens);
  if (tokens <= 0 || hidden <= 0 || chunks > 65535) {
    throw invalid_argument("rmsnorm_weight_gradient: " + std::to_string(tokens) + " rows of " + std::to_string(hidden) +
                           " (at most 65535 chunks of " + std::to_string(rmsnorm_gradient_chunk) + " rows)");
  }
  const unsigned columns = unsigned((hidden + 255) / 256);
  detail::rmsnorm_weight_partials_kernel<T><<<dim3(columns, unsigned(chunks)), 256, 0, stream>>>(dy, x, inv_rms, tokens, int(hidden), partial);
  GPUCMP_CUDA_CHECK_LAST("rmsnorm weight partials kernel");
  detail::sum_partials_kernel<<<columns, 256, 0, stream>>>(partial, chunks, int(hidden), dw);
  GPUCMP_CUDA_CHECK_LAST("rmsnorm weight sum kernel");
}

/// Enqueues the embedding's backward: row t of dx (count x hidden) added to row tokens[t] of
/// d_embedding (FP32; the caller zeroes it or has written the tied LM head's gradient there).
template <class T>
void embedding_backward(const T* dx, const std::int32_t* tokens, std::int64_t count, std::int64_t hidden, float* d_embedding,
                        cudaStream_t stream) {
  const std::int64_t total = count * hidden;
  if (total <= 0) return;
  detail::embedding_backward_kernel<T><<<unsigned((total + 255) / 256), 256, 0, stream>>>(dx, tokens, count, hidden, d_embedding);
  GPUCMP_CUDA_CHECK_LAST("embedding_backward kernel");
}

/// Enqueues the mean cross-entropy of `logits` (rows x vocab, T) against `labels` (rows;
/// -100: none): *loss the mean over the labelled rows, `logits` overwritten by the loss's
/// gradient. Scratch: `count` (one float) and `row_loss` (rows doubles).
template <class T>
void cross_entropy(T* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t vocab, float* count, double* row_loss,
                   float* loss, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0 || rows > 2147483647) {
    throw invalid_argument("cross_entropy: " + std::to_string(rows) + " rows of " + std::to_string(vocab) + " logits");
  }
  detail::count_labels_kernel<<<1, 1024, 0, stream>>>(labels, rows, count);
  GPUCMP_CUDA_CHECK_LAST("count_labels kernel");
  const unsigned threads = vocab >= 1024 ? 1024 : unsigned((vocab + 31) / 32 * 32);
  detail::cross_entropy_rows_kernel<T><<<unsigned(rows), threads, 0, stream>>>(logits, labels, vocab, count, row_loss);
  GPUCMP_CUDA_CHECK_LAST("cross_entropy rows kernel");
  detail::mean_of_rows<><<<1, 256, 0, stream>>>(row_loss, rows, count, loss);
  GPUCMP_CUDA_CHECK_LAST("mean loss kernel");
}

/// Enqueues copy[i] = master[i] rounded to T, for `count` values.
template <class T>
void round_copy(const float* master, T* copy, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  detail::round_copy_kernel<T><<<unsigned((count + 255) / 256), 256, 0, stream>>>(master, copy, count);
  GPUCMP_CUDA_CHECK_LAST("round_copy kernel");
}

/// Enqueues one AdamW step (training/adamw.hpp's rule, `o`) of `count` parameters (a multiple
/// of 4; 16-byte aligned buffers) at step *step + 1, then advances *step: FP32 master weights,
/// gradients and moments, and `copy` (the weights in T) written from the new master weights.
template <class T>
void adamw_step(float* param, const float* grad, float* m, float* v, T* copy, std::int64_t count, std::int64_t* step,
                const adamw_options& o, cudaStream_t stream) {
  o.validate();
  if (count <= 0 || count % 4 != 0) throw invalid_argument("adamw_step: parameters must be a positive multiple of 4, got " + std::to_string(count));
  const std::int64_t quads = count / 4;
  const detail::adamw_constants c{float(o.learning_rate), float(o.beta1), float(o.beta2), float(o.eps), float(o.weight_decay)};
  detail::adamw_kernel<T><<<unsigned((quads + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<float4*>(param), reinterpret_cast<const float4*>(grad), reinterpret_cast<float4*>(m),
      reinterpret_cast<float4*>(v), copy, quads, step, c);
  GPUCMP_CUDA_CHECK_LAST("adamw kernel");
  detail::advance_step_kernel<<<1, 1, 0, stream>>>(step);
  GPUCMP_CUDA_CHECK_LAST("advance_step kernel");
}

}  // namespace gpucmp
