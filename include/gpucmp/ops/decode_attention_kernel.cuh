// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp's own attention kernel for a decode step: one query token a sequence against its KV
// cache, split along the keys (split-KV, as FlashDecoding does it). A decode step reads K and V
// once and does two FLOPs a byte, so what decides its time is bytes in flight: cuDNN's SDPA at
// one sequence and 1-4k tokens reaches 0.22-0.34 of the copy rate on an H100
// (docs/results/h100-attention.md), since one sequence's few heads leave most SMs idle. Here a
// block takes one KV head of one sequence over a chunk of its keys, for every query head of
// that head's group; the chunks' partial softmax sums are merged by the block that finishes
// last (an arrival count a sequence and head, left at zero for the next call), so a call is one
// launch. ops/attention.cuh offers it as candidates beside cuDNN's plans, one a chunk size,
// where it applies (decode_attention_applies()), and its search keeps the faster.
#pragma once

#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/cuda/launch.hpp>
#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/decode_attention_chunks.hpp>
#include <gpucmp/ops/packed_elements.cuh>
#include <gpucmp/ops/vector_access.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace gpucmp {

/// Threads of a decode-attention block.
inline constexpr int decode_attention_threads = 128;

/// A call's operands (device pointers): Q and O BSHD with one token a sequence, K and V
/// contiguous BSHD (seq_kv tokens a sequence) or a page pool (pages x kv_heads x page_size x
/// head_dim) behind a page table.
struct decode_attention_args {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const std::int32_t* kv_lengths = nullptr;  ///< batch; null: seq_kv each
  const std::int32_t* page_table = nullptr;  ///< paged: batch x pages_per_sequence; null: contiguous
  float* partials = nullptr;                 ///< decode_attention_partial_floats()
  unsigned* arrivals = nullptr;              ///< batch x kv_heads, zero between calls
  std::int64_t seq_kv = 0, page_size = 0, pages_per_sequence = 0;
  int q_heads = 0, kv_heads = 0, chunk = 0, chunks = 0;  ///< chunks: of seq_kv, the grid's
  float scale_log2 = 0;                                  ///< the softmax scale times log2(e)
};

namespace detail {

// Where key j of sequence b, KV head h starts, in elements.
__device__ inline std::int64_t decode_kv_at(const decode_attention_args& a, int b, int h, std::int64_t j, int d) {
  if (a.page_table == nullptr) return ((std::int64_t(b) * a.seq_kv + j) * a.kv_heads + h) * d;
  const std::int64_t page = a.page_table[std::int64_t(b) * a.pages_per_sequence + j / a.page_size];
  return ((page * a.kv_heads + h) * a.page_size + j % a.page_size) * d;
}

// Block (chunk, KV head, sequence). A team of D / 8 lanes holds one key's 16-byte vectors and
// each of the G query heads' matching 8 elements; the block's teams take the chunk's keys in
// turn, U at a time (their K and V loads in flight together), each keeping an online softmax
// (maximum, sum, weighted V) a query head, merged across teams in shared memory.
template <class T, int D, int G>
__global__ void __launch_bounds__(decode_attention_threads) decode_attention_kernel(decode_attention_args a) {
  constexpr int TL = D / 8, TEAMS = decode_attention_threads / TL, U = 4, E = 8;
  __shared__ float s_max[TEAMS][G], s_sum[TEAMS][G], s_acc[TEAMS][G][D];
  __shared__ bool s_last;
  wait_for_prior_grids();
  let_next_grid_start();
  const int chunk = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const std::int64_t length = a.kv_lengths != nullptr ? ::min(std::int64_t(a.kv_lengths[b]), a.seq_kv) : a.seq_kv;
  const int chunks = int((length + a.chunk - 1) / a.chunk);
  if (chunk >= (chunks > 1 ? chunks : 1)) return;
  const int team = int(threadIdx.x) / TL, lane = int(threadIdx.x) % TL;
  const T* q = static_cast<const T*>(a.q) + (std::int64_t(b) * a.q_heads + std::int64_t(h) * G) * D + lane * E;
  float qv[G][E], best[G], sum[G], acc[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    load_vector(q + g * D, qv[g]);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qv[g][e] *= a.scale_log2;
      acc[g][e] = 0;
    }
    best[g] = -INFINITY;
    sum[g] = 0;
  }
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const std::int64_t begin = std::int64_t(chunk) * a.chunk, end = ::min(begin + std::int64_t(a.chunk), length);
  // Every team makes the same trips (the shuffles need the whole warp); keys past the end count as -inf.
  for (std::int64_t base = begin; base < end; base += std::int64_t(TEAMS) * U) {
    const std::int64_t j0 = base + team;
    packed<T> kr[U], vr[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t j = j0 + std::int64_t(u) * TEAMS;
      if (j < end) {
        const std::int64_t at = decode_kv_at(a, b, h, j, D) + lane * E;
        kr[u] = *reinterpret_cast<const packed<T>*>(k + at);
        vr[u] = *reinterpret_cast<const packed<T>*>(v + at);
      } else {
        kr[u] = packed<T>{};
        vr[u] = packed<T>{};
      }
    }
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) dot += qv[g][e] * to_float(kr[u].v[e]);
#pragma unroll
        for (int offset = TL / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[u][g] = j0 + std::int64_t(u) * TEAMS < end ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float top = best[g];
#pragma unroll
      for (int u = 0; u < U; ++u) top = fmaxf(top, s[u][g]);
      if (top == -INFINITY) continue;  // no key yet (this team's first keys all past the end)
      const float keep = exp2f(best[g] - top);  // 0 when best was -inf
      sum[g] *= keep;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] *= keep;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float p = exp2f(s[u][g] - top);
        sum[g] += p;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] += p * to_float(vr[u].v[e]);
      }
      best[g] = top;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      s_max[team][g] = best[g];
      s_sum[team][g] = sum[g];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) s_acc[team][g][lane * E + e] = acc[g][e];
  }
  __syncthreads();
  T* o = static_cast<T*>(a.o) + (std::int64_t(b) * a.q_heads + std::int64_t(h) * G) * D;
  const std::int64_t slot = (std::int64_t(b) * a.kv_heads + h) * a.chunks;  // this head's first chunk
  for (int i = int(threadIdx.x); i < G * D; i += decode_attention_threads) {
    const int g = i / D, d = i % D;
    float top = -INFINITY;
    for (int t = 0; t < TEAMS; ++t) top = fmaxf(top, s_max[t][g]);
    float total = 0, weighted = 0;
    for (int t = 0; t < TEAMS; ++t) {
      if (s_max[t][g] == -INFINITY) continue;
      const float w = exp2f(s_max[t][g] - top);
      total += s_sum[t][g] * w;
      weighted += s_acc[t][g][d] * w;
    }
    if (chunks <= 1) {
      o[g * D + d] = from_float<T>(total > 0 ? weighted / total : 0.0f);
    } else {
      float* partial = a.partials + ((slot + chunk) * G + g) * (D + 2);
      if (d == 0) {
        partial[0] = top;
        partial[1] = total;
      }
      partial[2 + d] = weighted;
    }
  }
  if (chunks <= 1) return;
  // The last of the head's chunks to arrive merges them all.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* arrived = a.arrivals + std::int64_t(b) * a.kv_heads + h;
    s_last = atomicAdd(arrived, 1u) == unsigned(chunks - 1);
    if (s_last) *arrived = 0;  // every other chunk has arrived: ready for the next call
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int i = int(threadIdx.x); i < G * D; i += decode_attention_threads) {
    const int g = i / D, d = i % D;
    float top = -INFINITY;
    for (int c = 0; c < chunks; ++c) top = fmaxf(top, __ldcg(a.partials + ((slot + c) * G + g) * (D + 2)));
    float total = 0, weighted = 0;
    for (int c = 0; c < chunks; ++c) {
      const float* partial = a.partials + ((slot + c) * G + g) * (D + 2);
      const float m = __ldcg(partial);
      if (m == -INFINITY) continue;
      const float w = exp2f(m - top);
      total += __ldcg(partial + 1) * w;
      weighted += __ldcg(partial + 2 + d) * w;
    }
    o[g * D + d] = from_float<T>(total > 0 ? weighted / total : 0.0f);
  }
}

template <class T, int D>
void launch_decode_attention_for(const decode_attention_args& a, int group, dim3 grid, cudaStream_t stream, launch_order order) {
  switch (group) {
    case 1: return launch_kernel(decode_attention_kernel<T, D, 1>, grid, dim3(decode_attention_threads), 0, stream, order, "decode attention", a);
    case 2: return launch_kernel(decode_attention_kernel<T, D, 2>, grid, dim3(decode_attention_threads), 0, stream, order, "decode attention", a);
    case 4: return launch_kernel(decode_attention_kernel<T, D, 4>, grid, dim3(decode_attention_threads), 0, stream, order, "decode attention", a);
    case 8: return launch_kernel(decode_attention_kernel<T, D, 8>, grid, dim3(decode_attention_threads), 0, stream, order, "decode attention", a);
  }
  throw invalid_argument("decode attention: " + std::to_string(group) + " query heads a KV head (1, 2, 4 or 8)");
}

}  // namespace detail

/// Enqueues the split-KV decode kernel for `p` (decode_attention_applies()) at chunks of
/// `chunk` keys on `a`'s operands; a.partials and a.arrivals as decode_attention_partial_floats()
/// and batch x kv_heads need (unused at one chunk). Throws invalid_argument where it does not apply.
inline void launch_decode_attention(const attention_problem& p, decode_attention_args a, std::int64_t chunk, cudaStream_t stream,
                                    launch_order order = launch_order::serial) {
  if (!decode_attention_applies(p) || chunk < 1) throw invalid_argument("decode attention: does not compute " + p.name());
  a.seq_kv = p.seq_kv;
  a.page_size = p.page_size;
  a.pages_per_sequence = p.pages_per_sequence();
  a.q_heads = int(p.q_heads);
  a.kv_heads = int(p.kv_heads);
  a.chunk = int(chunk);
  a.chunks = int((p.seq_kv + chunk - 1) / chunk);
  a.scale_log2 = float(p.applied_scale() * 1.4426950408889634);
  if (a.chunks > 1 && (a.partials == nullptr || a.arrivals == nullptr)) {
    throw invalid_argument("decode attention: " + std::to_string(a.chunks) + " chunks need the partial sums and arrival counts");
  }
  const dim3 grid{unsigned(a.chunks), unsigned(p.kv_heads), unsigned(p.batch)};
  const int group = int(p.q_heads / p.kv_heads);
  auto by_type = [&](auto zero) {
    using T = decltype(zero);
    switch (p.head_dim) {
      case 64: return detail::launch_decode_attention_for<T, 64>(a, group, grid, stream, order);
      case 128: return detail::launch_decode_attention_for<T, 128>(a, group, grid, stream, order);
      case 256: return detail::launch_decode_attention_for<T, 256>(a, group, grid, stream, order);
    }
    throw invalid_argument("decode attention: head_dim " + std::to_string(p.head_dim) + " (64, 128 or 256)");
  };
  if (types_of(p.dtype).input == element_type::fp16) {
    by_type(__half{});
  } else {
    by_type(__nv_bfloat16{});
  }
}

}  // namespace gpucmp
