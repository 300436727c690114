// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The data movement of a decoder step that is no operation of its own: the embedding lookup,
// each token's position, Q split out of the fused QKV rows while K and V are appended to the
// KV cache, the key lengths of a decode step, and the last token of each prompt gathered for
// the LM head. Memory-bound copies of a few MB at most, 16 bytes a thread where rows allow.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace gpucmp {
namespace detail {

// Copies `count` 16-byte vectors a row from each of `rows` rows: row r of dst at dst_at(r),
// of src at src_at(r) (in vectors). One thread a vector.
template <class DstAt, class SrcAt>
__global__ void copy_rows_kernel(uint4* dst, const uint4* src, std::int64_t rows, std::int64_t count, DstAt dst_at,
                                 SrcAt src_at) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * count) return;
  const std::int64_t r = i / count, c = i % count;
  dst[dst_at(r) + c] = src[src_at(r) + c];
}

template <class DstAt, class SrcAt>
void copy_rows(void* dst, const void* src, std::int64_t rows, std::int64_t row_bytes, DstAt dst_at, SrcAt src_at,
               cudaStream_t stream) {
  if (row_bytes % 16 != 0) throw invalid_argument("decoder: rows of " + std::to_string(row_bytes) + " bytes are not 16-byte vectors");
  const std::int64_t count = row_bytes / 16, total = rows * count;
  if (total == 0) return;
  const unsigned threads = 256;
  copy_rows_kernel<<<unsigned((total + threads - 1) / threads), threads, 0, stream>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), rows, count, dst_at, src_at);
  GPUCMP_CUDA_CHECK_LAST("decoder copy_rows");
}

struct embedding_at {  // token r's row of the embedding, in vectors
  const std::int32_t* tokens;
  std::int64_t vectors;
  __device__ std::int64_t operator()(std::int64_t r) const { return std::int64_t(tokens[r]) * vectors; }
};

struct dense_at {  // row r of a dense matrix of `vectors` a row, plus an offset
  std::int64_t vectors, offset;
  __device__ std::int64_t operator()(std::int64_t r) const { return r * vectors + offset; }
};

// Token r = (sequence b, i-th new token) lands at position start + i of sequence b's cache:
// its row, in vectors, of a cache of max_context tokens a sequence.
struct cache_at {
  std::int64_t per_sequence, start, max_context, vectors;
  __device__ std::int64_t operator()(std::int64_t r) const {
    return ((r / per_sequence) * max_context + start + r % per_sequence) * vectors;
  }
};

struct last_token_at {  // sequence r's last token of `per_sequence`, in a dense matrix
  std::int64_t per_sequence, vectors;
  __device__ std::int64_t operator()(std::int64_t r) const { return ((r + 1) * per_sequence - 1) * vectors; }
};

__global__ inline void fill_positions_kernel(std::int32_t* positions, std::int64_t tokens, std::int64_t per_sequence,
                                             std::int64_t start) {
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < tokens) positions[t] = std::int32_t(start + t % per_sequence);
}

__global__ inline void fill_lengths_kernel(std::int32_t* lengths, std::int64_t count, std::int32_t value) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) lengths[i] = value;
}

}  // namespace detail

/// Writes positions start + (t mod per_sequence) for the `tokens` tokens of a batch laid out
/// sequence by sequence (per_sequence new tokens each).
inline void fill_positions(std::int32_t* positions, std::int64_t tokens, std::int64_t per_sequence, std::int64_t start,
                           cudaStream_t stream) {
  if (tokens == 0) return;
  detail::fill_positions_kernel<<<unsigned((tokens + 255) / 256), 256, 0, stream>>>(positions, tokens, per_sequence, start);
  GPUCMP_CUDA_CHECK_LAST("fill_positions");
}

/// Writes `value` into `count` lengths.
inline void fill_lengths(std::int32_t* lengths, std::int64_t count, std::int32_t value, cudaStream_t stream) {
  if (count == 0) return;
  detail::fill_lengths_kernel<<<unsigned((count + 255) / 256), 256, 0, stream>>>(lengths, count, value);
  GPUCMP_CUDA_CHECK_LAST("fill_lengths");
}

/// The embedding rows of `tokens` (device ids, each in [0, vocab): the caller's to check) into
/// `out`, `count` rows of row_bytes.
inline void embed_tokens(void* out, const void* embedding, const std::int32_t* tokens, std::int64_t count,
                         std::int64_t row_bytes, cudaStream_t stream) {
  const std::int64_t vectors = row_bytes / 16;
  detail::copy_rows(out, embedding, count, row_bytes, detail::dense_at{vectors, 0}, detail::embedding_at{tokens, vectors},
                    stream);
}

/// The geometry of one layer's fused QKV rows and KV cache, in bytes.
struct qkv_split {
  std::int64_t q_bytes;        ///< a token's Q (q_heads x head_dim elements)
  std::int64_t kv_bytes;       ///< a token's K (and V)
  std::int64_t max_context;    ///< tokens a sequence's cache holds
};

/// Splits `tokens` fused QKV rows (sequence by sequence, per_sequence new tokens each, RoPE
/// already applied) into Q (dense rows) and the K and V caches (max_context tokens a sequence,
/// BSHD), the new tokens at positions start to start + per_sequence - 1.
inline void split_qkv_into_cache(const void* qkv, void* q, void* k_cache, void* v_cache, const qkv_split& g,
                                 std::int64_t tokens, std::int64_t per_sequence, std::int64_t start, cudaStream_t stream) {
  const std::int64_t row = (g.q_bytes + 2 * g.kv_bytes) / 16, qv = g.q_bytes / 16, kv = g.kv_bytes / 16;
  detail::copy_rows(q, qkv, tokens, g.q_bytes, detail::dense_at{qv, 0}, detail::dense_at{row, 0}, stream);
  const detail::cache_at at{per_sequence, start, g.max_context, kv};
  detail::copy_rows(k_cache, qkv, tokens, g.kv_bytes, at, detail::dense_at{row, qv}, stream);
  detail::copy_rows(v_cache, qkv, tokens, g.kv_bytes, at, detail::dense_at{row, qv + kv}, stream);
}

/// The last of each sequence's per_sequence rows (row_bytes each) of `in`, into `sequences`
/// dense rows of `out`.
inline void gather_last_tokens(void* out, const void* in, std::int64_t sequences, std::int64_t per_sequence,
                               std::int64_t row_bytes, cudaStream_t stream) {
  const std::int64_t vectors = row_bytes / 16;
  detail::copy_rows(out, in, sequences, row_bytes, detail::dense_at{vectors, 0}, detail::last_token_at{per_sequence, vectors},
                    stream);
}

}  // namespace gpucmp
