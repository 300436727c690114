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

#include <gpucmp/cuda/async_copy.cuh>
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
  std::int64_t pages_per_sequence = 0;
  int seq_kv = 0, page_size = 0, page_shift = 0;         ///< page_size: 1 << page_shift
  int q_heads = 0, kv_heads = 0, chunk = 0, chunks = 0;  ///< chunks: of seq_kv, the grid's
  float scale_log2 = 0;                                  ///< the softmax scale times log2(e)
};

namespace detail {

// Block (chunk, KV head, sequence). A team of D / 8 lanes takes one key at a time, each lane
// 8 of its elements and the matching 8 of each of the G query heads; the block's teams take
// the chunk's keys in turn, U a team a trip. Every thread copies its own K and V vectors into
// shared memory (cp.async) Stages - 1 trips ahead of the trip it computes, so the copies stay
// in flight without a barrier and without registers; a paged cache's page numbers are read one
// trip before their copies start. Each team keeps an online softmax (maximum, sum, weighted V) a
// query head; the teams merge in shared memory, the chunks through decode_attention_partials.
template <class T, int D, int G>
__global__ void __launch_bounds__(decode_attention_threads) decode_attention_kernel(decode_attention_args a) {
  constexpr int TL = D / 8, TEAMS = decode_attention_threads / TL, U = 2, E = 8, STAGES = 4, TRIP = TEAMS * U;
  constexpr int PIPELINE = STAGES * 2 * U * decode_attention_threads;  // 16-byte vectors
  constexpr int MERGE = TEAMS * G * D * 4 / 16;                        // s_acc, in vectors
  __shared__ uint4 s_tiles[PIPELINE > MERGE ? PIPELINE : MERGE];       // the copies, then the teams' sums
  __shared__ float s_max[TEAMS][G], s_sum[TEAMS][G], s_weight[G][decode_attention_max_chunks];
  __shared__ bool s_last;
  wait_for_prior_grids();
  let_next_grid_start();
  const int chunk = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const int length = a.kv_lengths != nullptr ? ::min(a.kv_lengths[b], a.seq_kv) : a.seq_kv;
  const int chunks = (length + a.chunk - 1) / a.chunk;
  if (chunk >= (chunks > 1 ? chunks : 1)) return;
  const int tid = int(threadIdx.x), team = tid / TL, lane = tid % TL;
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
  const int begin = chunk * a.chunk, end = ::min(begin + a.chunk, length), trips = (end - begin + TRIP - 1) / TRIP;
  const std::int32_t* pages = a.page_table != nullptr ? a.page_table + std::int64_t(b) * a.pages_per_sequence : nullptr;
  auto key = [&](int trip, int u) { return begin + trip * TRIP + u * TEAMS + team; };
  // This lane's 8 elements of key j (in `page`, when paged), in elements from K's or V's start.
  auto element = [&](int j, std::int32_t page) {
    if (pages == nullptr) return ((std::int64_t(b) * a.seq_kv + j) * a.kv_heads + h) * D + lane * E;
    return ((std::int64_t(page) * a.kv_heads + h) * a.page_size + (j & (a.page_size - 1))) * D + lane * E;
  };
  std::int32_t page_of[U];  // the page table's entries for the next trip to copy
  auto read_pages = [&](int trip) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = key(trip, u);
      page_of[u] = pages != nullptr && trip < trips && j < end ? pages[j >> a.page_shift] : 0;
    }
  };
  auto start_copies = [&](int trip) {
    uint4* stage = s_tiles + (trip % STAGES) * 2 * U * decode_attention_threads;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = key(trip, u);
      const bool inside = j < end;
      const std::int64_t at = inside ? element(j, page_of[u]) : 0;
      copy_16_async(stage + u * decode_attention_threads + tid, k + at, inside);
      copy_16_async(stage + (U + u) * decode_attention_threads + tid, v + at, inside);
    }
  };
  read_pages(0);
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) {
    if (t < trips) start_copies(t);
    commit_async_copies();
    read_pages(t + 1);
  }
  for (int trip = 0; trip < trips; ++trip) {
    if (trip + STAGES - 1 < trips) start_copies(trip + STAGES - 1);  // the stage this thread read last trip
    commit_async_copies();
    read_pages(trip + STAGES);
    wait_async_copies<STAGES - 1>();  // this trip's copies have landed
    const uint4* stage = s_tiles + (trip % STAGES) * 2 * U * decode_attention_threads;
    packed<T> kr[U];
    float vf[U][E];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      kr[u] = *reinterpret_cast<const packed<T>*>(stage + u * decode_attention_threads + tid);
      load_vector(reinterpret_cast<const T*>(stage + (U + u) * decode_attention_threads + tid), vf[u]);
    }
    // Every team makes the same trips (the shuffles need the whole warp); keys past the end
    // count as -inf (their V was zero-filled, so they add nothing).
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[E];
#pragma unroll
      for (int e = 0; e < E; ++e) kf[e] = to_float(kr[u].v[e]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) dot += qv[g][e] * kf[e];
#pragma unroll
        for (int offset = TL / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[u][g] = key(trip, u) < end ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float top = best[g];
#pragma unroll
      for (int u = 0; u < U; ++u) top = fmaxf(top, s[u][g]);
      if (top == -INFINITY) continue;  // no key yet (this team's first keys all past the end)
      if (top > best[g]) {             // rescaled only when the maximum grows: rarely, after the first keys
        const float keep = exp2f(best[g] - top);  // 0 when best was -inf
        sum[g] *= keep;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] *= keep;
        best[g] = top;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float p = exp2f(s[u][g] - top);
        sum[g] += p;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] += p * vf[u][e];
      }
    }
  }
  wait_async_copies<0>();
  __syncthreads();  // s_acc below takes the tiles' place
  float(*s_acc)[G][D] = reinterpret_cast<float(*)[G][D]>(s_tiles);
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
  for (int i = tid; i < G * D; i += decode_attention_threads) {
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
  if (tid == 0) {
    unsigned* arrived = a.arrivals + std::int64_t(b) * a.kv_heads + h;
    s_last = atomicAdd(arrived, 1u) == unsigned(chunks - 1);
    if (s_last) *arrived = 0;  // every other chunk has arrived: ready for the next call
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Each chunk's weight a query head once (its maximum against the head's), then the weighted
  // sums along d, every chunk's load independent of the others.
  for (int i = tid; i < G * chunks; i += decode_attention_threads) {
    const int g = i / chunks, c = i % chunks;
    s_weight[g][c] = __ldcg(a.partials + ((slot + c) * G + g) * (D + 2));
  }
  __syncthreads();
  if (tid < G) {
    float top = -INFINITY;
    for (int c = 0; c < chunks; ++c) top = fmaxf(top, s_weight[tid][c]);
    for (int c = 0; c < chunks; ++c) {
      s_weight[tid][c] = s_weight[tid][c] == -INFINITY ? 0.0f : exp2f(s_weight[tid][c] - top);
    }
  }
  __syncthreads();
  for (int i = tid; i < G * D; i += decode_attention_threads) {
    const int g = i / D, d = i % D;
    float total = 0, weighted = 0;
    for (int c = 0; c < chunks; ++c) {
      const float* partial = a.partials + ((slot + c) * G + g) * (D + 2);
      const float w = s_weight[g][c];
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
  a.seq_kv = int(p.seq_kv);
  a.page_size = int(p.page_size);
  while (std::int64_t(1) << a.page_shift < p.page_size) ++a.page_shift;
  a.pages_per_sequence = p.pages_per_sequence();
  a.q_heads = int(p.q_heads);
  a.kv_heads = int(p.kv_heads);
  a.chunk = int(chunk);
  a.chunks = int((p.seq_kv + chunk - 1) / chunk);
  a.scale_log2 = float(p.applied_scale() * 1.4426950408889634);
  if (a.chunks > decode_attention_max_chunks) {
    throw invalid_argument("decode attention: chunks of " + std::to_string(chunk) + " keys make " + std::to_string(a.chunks) +
                           " chunks of " + p.name() + " (at most " + std::to_string(decode_attention_max_chunks) + ")");
  }
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
