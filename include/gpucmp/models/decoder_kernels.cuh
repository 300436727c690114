// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The data movement of a decoder step that is no operation of its own: the embedding lookup,
// each token's position, Q split out of the fused QKV rows while K and V are appended to the
// KV cache (contiguous, or a pool of pages behind a page table), a step's sequence lengths,
// and the last token of each prompt gathered for the LM head. Memory-bound copies of a few MB
// at most, 16 bytes a thread where rows allow. Where a head's halves are whole vectors (Llama's
// geometry), rope_split_qkv_into_cache() rotates Q and K on their way out of the QKV rows, so
// that a layer launches one small kernel for RoPE and the split, not two (the decoder's
// fuse_rope_split option).
//
// A step's sequences are described on the device by its lengths (decoder_step_lengths): for
// each of its `batch` sequences the new tokens it takes (q), the keys it holds after the step
// (kv) and the position of its first new token (start), so that one captured step serves any
// lengths the host uploads. A sequence padded to the step's shape (rows past its q) writes no
// K or V.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/cuda/launch.hpp>
#include <gpucmp/ops/rope.cuh>
#include <gpucmp/ops/vector_access.cuh>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace gpucmp {
namespace detail {

// Copies `count` 16-byte vectors a row from each of `rows` rows: row r of dst at dst_at(r),
// of src at src_at(r) (in vectors); a row whose dst_at is negative is skipped. One thread a
// vector.
template <class DstAt, class SrcAt>
__global__ void copy_rows_kernel(uint4* dst, const uint4* src, std::int64_t rows, std::int64_t count, DstAt dst_at,
                                 SrcAt src_at) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * count) return;
  const std::int64_t r = i / count, c = i % count;
  const std::int64_t to = dst_at(r);
  if (to >= 0) dst[to + c] = src[src_at(r) + c];
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

}  // namespace detail

/// A step's sequence lengths on the device, `batch` int32 each: the new tokens of each
/// sequence (q), the keys it holds after the step (kv = start + q), and its first new token's
/// position (start). q then kv is the layout attention_tensors::seq_lengths reads.
struct decoder_step_lengths {
  std::int32_t* data = nullptr;  ///< 3 x batch: q, kv, start
  std::int64_t batch = 0;
  __host__ __device__ std::int32_t* q() const noexcept { return data; }
  __host__ __device__ std::int32_t* kv() const noexcept { return data + batch; }
  __host__ __device__ std::int32_t* start() const noexcept { return data + 2 * batch; }
};

/// The KV cache a step writes: contiguous (batch x max_context tokens x kv heads x head_dim,
/// BSHD: sequence b of the step is the cache's row b) or a pool of pages (pages x kv heads x
/// page_size x head_dim, attention's paged layout) that sequence b reaches through row b of
/// `table`.
struct kv_cache_layout {
  const std::int32_t* table = nullptr;  ///< the step's page table; null: contiguous
  std::int64_t max_context = 0, page_size = 0, pages_per_sequence = 0, kv_heads = 0;
};

namespace detail {

// Row r = token t x kv heads + head h of the fused QKV rows: where its K (or V) head goes, in
// vectors, or -1 for a padded token (past its sequence's q).
struct kv_cache_at {
  kv_cache_layout cache;
  const std::int32_t* positions;
  const std::int32_t* q_lengths;
  std::int64_t per_sequence, head_vectors;
  __device__ std::int64_t operator()(std::int64_t r) const {
    const std::int64_t t = r / cache.kv_heads, h = r % cache.kv_heads, b = t / per_sequence;
    if (t % per_sequence >= q_lengths[b]) return -1;
    const std::int64_t position = positions[t];
    if (cache.table == nullptr) return ((b * cache.max_context + position) * cache.kv_heads + h) * head_vectors;
    const std::int64_t page = cache.table[b * cache.pages_per_sequence + position / cache.page_size];
    return ((page * cache.kv_heads + h) * cache.page_size + position % cache.page_size) * head_vectors;
  }
};

struct qkv_split_vectors {  // a fused QKV row in 16-byte vectors: Q, then K's and V's kv_heads heads
  std::int64_t q, kv_heads, head;
};

// One thread a vector of the fused QKV rows: Q's to the dense Q rows, K's and V's to their
// places in the cache (none for a padding token's).
__global__ inline void split_qkv_kernel(const uint4* __restrict__ qkv, uint4* __restrict__ q, uint4* k_cache,
                                        uint4* v_cache, qkv_split_vectors s, kv_cache_at at, std::int64_t total) {
  wait_for_prior_grids();
  let_next_grid_start();
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const std::int64_t kv = s.kv_heads * s.head, row = s.q + 2 * kv;
  const std::int64_t token = i / row, c = i % row;
  if (c < s.q) {
    q[token * s.q + c] = qkv[i];
    return;
  }
  const std::int64_t in_kv = (c - s.q) % kv, head = in_kv / s.head;
  const std::int64_t to = at(token * s.kv_heads + head);
  if (to >= 0) ((c - s.q) < kv ? k_cache : v_cache)[to + in_kv % s.head] = qkv[i];
}

// The geometry of RoPE applied while splitting: `groups` vectors a head's half.
struct rope_split_vectors {
  int q_heads, kv_heads, head_dim, groups;
};

// One thread a (token, head, vector of the head's first half) of the fused QKV rows: that
// vector and its partner a half further on, rotated by the token's angles for Q's and K's heads
// (as rope_vector_kernel does, in FP32, rounded once), copied as they are for V's, then stored
// where split_qkv_kernel stores them.
template <class T>
__global__ void rope_split_qkv_kernel(const T* __restrict__ qkv, T* __restrict__ q, T* k_cache, T* v_cache,
                                      const std::int32_t* __restrict__ positions, const float2* __restrict__ table,
                                      rope_split_vectors g, kv_cache_at at, std::int64_t units) {
  wait_for_prior_grids();
  let_next_grid_start();
  constexpr int V = vector_elements<T>;
  const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;
  const int heads = g.q_heads + 2 * g.kv_heads, half = g.groups * V;
  const std::int64_t token = u / (std::int64_t(heads) * g.groups);
  const int rest = int(u - token * heads * g.groups), head = rest / g.groups, group = rest % g.groups;
  const T* from = qkv + (token * heads + head) * g.head_dim + group * V;
  T* to = nullptr;
  if (head < g.q_heads) {
    to = q + (token * g.q_heads + head) * g.head_dim;
  } else {
    const bool key = head < g.q_heads + g.kv_heads;
    const int kv_head = head - g.q_heads - (key ? 0 : g.kv_heads);
    const std::int64_t at_vectors = at(token * g.kv_heads + kv_head);
    if (at_vectors < 0) return;  // a padding token's K and V stay out of the cache
    to = (key ? k_cache : v_cache) + at_vectors * V;
    if (!key) {
      using raw = packed<T>;
      *reinterpret_cast<raw*>(to + group * V) = *reinterpret_cast<const raw*>(from);
      *reinterpret_cast<raw*>(to + half + group * V) = *reinterpret_cast<const raw*>(from + half);
      return;
    }
  }
  float x1[V], x2[V];
  load_vector(from, x1);
  load_vector(from + half, x2);
  const float2* cs = table + std::int64_t(positions[token]) * half + group * V;
#pragma unroll
  for (int e = 0; e < V; ++e) rotate(x1[e], x2[e], cs[e]);
  store_vector(to + group * V, x1);
  store_vector(to + half + group * V, x2);
}

struct last_token_at {  // sequence r's last new token (of per_sequence rows, q_lengths[r] real), in a dense matrix
  const std::int32_t* q_lengths;
  std::int64_t per_sequence, vectors;
  __device__ std::int64_t operator()(std::int64_t r) const { return (r * per_sequence + q_lengths[r] - 1) * vectors; }
};

// A padded token (past its sequence's q) takes its sequence's last real position, so RoPE
// reads a row of its table.
__global__ inline void fill_positions_kernel(std::int32_t* positions, std::int64_t tokens, std::int64_t per_sequence,
                                             const std::int32_t* q_lengths, const std::int32_t* starts) {
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const std::int64_t b = t / per_sequence, i = t % per_sequence;
  positions[t] = starts[b] + std::int32_t(i < q_lengths[b] ? i : q_lengths[b] - 1);
}

__global__ inline void fill_uniform_lengths_kernel(decoder_step_lengths lengths, std::int32_t q, std::int32_t start) {
  const std::int64_t b = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= lengths.batch) return;
  lengths.q()[b] = q;
  lengths.kv()[b] = start + q;
  lengths.start()[b] = start;
}

}  // namespace detail

/// Every sequence of a step takes `q` new tokens after `start` cached ones (on the device, so
/// that a captured step can set them).
inline void fill_uniform_lengths(const decoder_step_lengths& lengths, std::int64_t q, std::int64_t start, cudaStream_t stream) {
  if (lengths.batch == 0) return;
  detail::fill_uniform_lengths_kernel<<<unsigned((lengths.batch + 255) / 256), 256, 0, stream>>>(
      lengths, std::int32_t(q), std::int32_t(start));
  GPUCMP_CUDA_CHECK_LAST("fill_uniform_lengths");
}

/// Writes each token's position, start + i for the i-th new token of its sequence, for the
/// `tokens` tokens of a step laid out sequence by sequence (per_sequence rows each; rows past a
/// sequence's q take its last position).
inline void fill_positions(std::int32_t* positions, std::int64_t tokens, std::int64_t per_sequence,
                           const decoder_step_lengths& lengths, cudaStream_t stream) {
  if (tokens == 0) return;
  detail::fill_positions_kernel<<<unsigned((tokens + 255) / 256), 256, 0, stream>>>(positions, tokens, per_sequence,
                                                                                   lengths.q(), lengths.start());
  GPUCMP_CUDA_CHECK_LAST("fill_positions");
}

/// The embedding rows of `tokens` (device ids, each in [0, vocab): the caller's to check) into
/// `out`, `count` rows of row_bytes.
inline void embed_tokens(void* out, const void* embedding, const std::int32_t* tokens, std::int64_t count,
                         std::int64_t row_bytes, cudaStream_t stream) {
  const std::int64_t vectors = row_bytes / 16;
  detail::copy_rows(out, embedding, count, row_bytes, detail::dense_at{vectors, 0}, detail::embedding_at{tokens, vectors},
                    stream);
}

/// The geometry of one layer's fused QKV rows and KV cache.
struct qkv_split {
  std::int64_t q_bytes;     ///< a token's Q (q_heads x head_dim elements)
  std::int64_t head_bytes;  ///< one K (or V) head of a token (head_dim elements)
  kv_cache_layout cache;    ///< where K and V go
};

/// Splits `tokens` fused QKV rows (sequence by sequence, per_sequence rows each, RoPE already
/// applied) into Q (dense rows) and the K and V caches, each sequence's new tokens at
/// positions[t]; rows past a sequence's q write no K or V.
inline void split_qkv_into_cache(const void* qkv, void* q, void* k_cache, void* v_cache, const qkv_split& g,
                                 std::int64_t tokens, std::int64_t per_sequence, const std::int32_t* positions,
                                 const decoder_step_lengths& lengths, cudaStream_t stream,
                                 launch_order order = launch_order::serial) {
  if (g.q_bytes % 16 != 0 || g.head_bytes % 16 != 0) {
    throw invalid_argument("decoder: Q rows of " + std::to_string(g.q_bytes) + " bytes or heads of " + std::to_string(g.head_bytes) +
                           " bytes are not 16-byte vectors");
  }
  const std::int64_t hv = g.head_bytes / 16, qv = g.q_bytes / 16;
  const std::int64_t total = tokens * (qv + 2 * g.cache.kv_heads * hv);
  if (total == 0) return;
  const detail::qkv_split_vectors split{qv, g.cache.kv_heads, hv};
  const detail::kv_cache_at at{g.cache, positions, lengths.q(), per_sequence, hv};
  const unsigned threads = 256;
  launch_kernel(detail::split_qkv_kernel, dim3(unsigned((total + threads - 1) / threads)), dim3(threads), 0, stream, order,
                "decoder split_qkv_into_cache", static_cast<const uint4*>(qkv), static_cast<uint4*>(q),
                static_cast<uint4*>(k_cache), static_cast<uint4*>(v_cache), split, at, total);
}

/// Each sequence's last new token (row q - 1 of its per_sequence rows of row_bytes) of `in`,
/// into `lengths.batch` dense rows of `out`.
inline void gather_last_tokens(void* out, const void* in, const decoder_step_lengths& lengths, std::int64_t per_sequence,
                               std::int64_t row_bytes, cudaStream_t stream) {
  const std::int64_t vectors = row_bytes / 16;
  detail::copy_rows(out, in, lengths.batch, row_bytes, detail::dense_at{vectors, 0},
                    detail::last_token_at{lengths.q(), per_sequence, vectors}, stream);
}

/// Whether rope_split_qkv_into_cache() takes RoPE `r`: half pairs over the whole head, each
/// half whole 16-byte vectors of `element_bytes`-byte elements.
inline bool rope_split_applies(const rope_problem& r, std::int64_t element_bytes) {
  const std::int64_t vector = 16 / element_bytes;
  return r.pairs == rope_pairs::half && r.rotated() == r.head_dim && (r.head_dim / 2) % vector == 0;
}

/// run_rope() of `r` and split_qkv_into_cache() in one kernel (rope_split_applies(r,
/// sizeof(T))): `tokens` fused QKV rows, not yet rotated and left as they are, into Q and the
/// caches; `table` the device copy of rope_table(r).
template <class T>
void rope_split_qkv_into_cache(const rope_problem& r, const T* qkv, T* q, T* k_cache, T* v_cache, const qkv_split& g,
                               std::int64_t tokens, std::int64_t per_sequence, const std::int32_t* positions,
                               const float2* table, const decoder_step_lengths& lengths, cudaStream_t stream,
                               launch_order order = launch_order::serial) {
  if (!rope_split_applies(r, sizeof(T))) throw invalid_argument("decoder: RoPE " + r.name() + " cannot be applied while splitting");
  if (g.head_bytes != r.head_dim * std::int64_t(sizeof(T)) || g.q_bytes != r.q_heads * g.head_bytes ||
      g.cache.kv_heads != r.kv_heads) {
    throw invalid_argument("decoder: RoPE " + r.name() + " does not match the QKV rows it would split");
  }
  constexpr int V = vector_elements<T>;
  const detail::rope_split_vectors geometry{int(r.q_heads), int(g.cache.kv_heads), int(r.head_dim), int(r.head_dim / 2 / V)};
  const std::int64_t units = tokens * (r.q_heads + 2 * g.cache.kv_heads) * geometry.groups;
  if (units == 0) return;
  const detail::kv_cache_at at{g.cache, positions, lengths.q(), per_sequence, g.head_bytes / 16};
  const unsigned threads = 128;
  launch_kernel(detail::rope_split_qkv_kernel<T>, dim3(unsigned((units + threads - 1) / threads)), dim3(threads), 0, stream, order,
                "decoder rope_split_qkv_into_cache", qkv, q, k_cache, v_cache, positions, table, geometry, at, units);
}

}  // namespace gpucmp
