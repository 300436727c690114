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
// launch. Its products run on tensor cores (a warp's 16 keys against the head's query heads):
// with one FMA a lane a key and head, the first version of this kernel was issue-bound at
// 0.36-0.52 of cuDNN's speed on an H100 (docs/results/h100-attention.md). ops/attention.cuh
// offers it as candidates beside cuDNN's plans, one a chunk size, where it applies
// (decode_attention_applies(), sm_80 on), and its search keeps the faster.
#pragma once

#include <gpucmp/cuda/async_copy.cuh>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/cuda/launch.hpp>
#include <gpucmp/cuda/warp_mma.cuh>
#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/decode_attention_chunks.hpp>
#include <gpucmp/ops/packed_elements.cuh>

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

// Keys a warp's tile: one m16n8k16 product's K dimension.
inline constexpr int decode_attention_tile = 16;
inline constexpr int decode_attention_warps = decode_attention_threads / 32;

// Tiles a warp keeps in flight besides the one it computes, plus one.
template <int D>
inline constexpr int decode_attention_stages = D >= 256 ? 2 : 3;

// Dynamic shared memory of a block: each warp's K and V tiles of every stage.
template <int D>
inline constexpr int decode_attention_shared_bytes =
    decode_attention_warps * decode_attention_stages<D> * 2 * decode_attention_tile * D * 2;  // K and V, 2-byte elements

extern __shared__ __align__(16) unsigned char decode_attention_shared[];

// Block (chunk, KV head, sequence); its 4 warps take the chunk's tiles of 16 keys in turn.
// Per tile a warp computes S^T = K Q^T on tensor cores (16 keys the rows, the G query heads of
// the KV head the 8 columns, zero past G), keeps an online softmax a query head on the columns
// its lanes hold, and adds O^T += V^T P^T (P rounded to T, as flash attention does; P^T's
// fragment needs P transposed, through 256 bytes of shared memory). Every lane copies its share
// of the tile's K and V into the warp's shared memory (cp.async, rows swizzled so that ldmatrix
// reads them without bank conflicts) Stages - 1 tiles ahead of the one computed; a paged cache's
// page number (a tile lies in one page: pages of at least 16 keys) is read a tile before its
// copies. The warps merge in shared memory, the chunks through the partial sums.
template <class T, int D, int G>
__global__ void __launch_bounds__(decode_attention_threads) decode_attention_kernel(decode_attention_args a) {
  constexpr int W = decode_attention_warps, TILE = decode_attention_tile, STAGES = decode_attention_stages<D>;
  constexpr int ROW = D / 8;               // 16-byte pieces of a key
  constexpr int PIECES = TILE * ROW / 32;  // of K (and of V) a lane copies a tile
  constexpr int STAGE = 2 * TILE * ROW;    // 16-byte pieces of a stage: K, then V
  __shared__ float s_max[W][G], s_sum[W][G], s_weight[G][decode_attention_max_chunks];
  __shared__ __align__(16) T s_p[W][8][TILE];  // each warp's P, heads by keys
  __shared__ bool s_last;
  wait_for_prior_grids();
  let_next_grid_start();
  const int chunk = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const int length = a.kv_lengths != nullptr ? ::min(a.kv_lengths[b], a.seq_kv) : a.seq_kv;
  const int chunks = (length + a.chunk - 1) / a.chunk;
  if (chunk >= (chunks > 1 ? chunks : 1)) return;
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, group = lane / 4, place = lane % 4;
  const int begin = chunk * a.chunk, end = ::min(begin + a.chunk, length);
  const int tiles = (end - begin + TILE - 1) / TILE, mine = tiles > warp ? (tiles - warp + W - 1) / W : 0;
  // Q^T as B fragments, one a 16 dimensions: this lane's column is query head `group` (zero past G).
  const T* q = static_cast<const T*>(a.q) + (std::int64_t(b) * a.q_heads + std::int64_t(h) * G) * D;
  unsigned qb[D / 16][2];
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    const bool column = group < G;
    qb[s][0] = column ? *reinterpret_cast<const unsigned*>(q + group * D + 16 * s + 2 * place) : 0u;
    qb[s][1] = column ? *reinterpret_cast<const unsigned*>(q + group * D + 16 * s + 8 + 2 * place) : 0u;
  }
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const std::int32_t* pages = a.page_table != nullptr ? a.page_table + std::int64_t(b) * a.pages_per_sequence : nullptr;
  uint4* tiles_of_warp = reinterpret_cast<uint4*>(decode_attention_shared) + warp * STAGES * STAGE;
  auto first_key = [&](int i) { return begin + (warp + i * W) * TILE; };  // of this warp's i-th tile
  std::int32_t page = 0;  // the page of the next tile to copy
  auto read_page = [&](int i) {
    if (pages != nullptr && i < mine) page = pages[first_key(i) >> a.page_shift];
  };
  auto start_copies = [&](int i) {
    uint4* stage = tiles_of_warp + (i % STAGES) * STAGE;
    const int first = first_key(i);
    // Rows of D elements: key `first`'s, and the step between keys.
    const std::int64_t row0 = pages == nullptr
                                  ? (std::int64_t(b) * a.seq_kv + first) * a.kv_heads + h
                                  : (std::int64_t(page) * a.kv_heads + h) * a.page_size + (first & (a.page_size - 1));
    const std::int64_t step = pages == nullptr ? a.kv_heads : 1;
#pragma unroll
    for (int n = 0; n < PIECES; ++n) {
      const int piece = n * 32 + lane, r = piece / ROW, c = piece % ROW;
      const bool inside = first + r < end;
      const std::int64_t at = inside ? (row0 + r * step) * D + c * 8 : 0;
      const int slot = r * ROW + (c ^ (r & 7));  // swizzled: a column of 8 rows spans 8 bank groups
      copy_16_async(stage + slot, k + at, inside);
      copy_16_async(stage + TILE * ROW + slot, v + at, inside);
    }
  };
  // This lane's two query heads (2 place and the next): running maximum and sum (its keys'
  // share), and O^T's fragments, one a 16 dimensions.
  float best[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0}, acc[D / 16][4];
#pragma unroll
  for (int m = 0; m < D / 16; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;
  read_page(0);
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < mine) start_copies(i);
    commit_async_copies();
    read_page(i + 1);
  }
  for (int i = 0; i < mine; ++i) {
    __syncwarp();  // every lane has read the stage refilled next, and s_p
    if (i + STAGES - 1 < mine) start_copies(i + STAGES - 1);
    commit_async_copies();
    read_page(i + STAGES);
    wait_async_copies<STAGES - 1>();
    __syncwarp();  // and every lane's copies of tile i have landed
    const uint4* kt = tiles_of_warp + (i % STAGES) * STAGE;
    const uint4* vt = kt + TILE * ROW;
    float st[4] = {0, 0, 0, 0};  // S^T: (key group, heads 2 place, +1), then key group + 8
#pragma unroll
    for (int s = 0; s < D / 16; ++s) {
      const int r = (lane / 8) % 2 * 8 + lane % 8, c = 2 * s + lane / 16;  // keys 0-7 | 8-15, then d low | high
      unsigned ka[4];
      load_matrices_x4<false>(ka, kt + r * ROW + (c ^ (r & 7)));
      mma_16x8x16<T>(st, ka, qb[s][0], qb[s][1]);
    }
    const int first = first_key(i);
    const bool low = first + group < end, high = first + group + 8 < end;
    float p[2][2];  // head j, key group | group + 8
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float x0 = low ? st[j] * a.scale_log2 : -INFINITY, x1 = high ? st[2 + j] * a.scale_log2 : -INFINITY;
      float top = fmaxf(x0, x1);
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 4));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 8));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 16));  // the tile's first key is inside: finite
      if (top > best[j]) {  // rescaled only when the maximum grows
        const float keep = exp2f(best[j] - top);
        sum[j] *= keep;
#pragma unroll
        for (int m = 0; m < D / 16; ++m) {
          acc[m][j] *= keep;
          acc[m][2 + j] *= keep;
        }
        best[j] = top;
      }
      p[j][0] = exp2f(x0 - best[j]);
      p[j][1] = exp2f(x1 - best[j]);
      sum[j] += p[j][0] + p[j][1];
    }
    // P^T as a B fragment wants (keys 2 place and the next, head group): transposed through s_p.
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s_p[warp][2 * place + j][group] = from_float<T>(p[j][0]);
      s_p[warp][2 * place + j][group + 8] = from_float<T>(p[j][1]);
    }
    __syncwarp();
    const unsigned pb0 = *reinterpret_cast<const unsigned*>(&s_p[warp][group][2 * place]);
    const unsigned pb1 = *reinterpret_cast<const unsigned*>(&s_p[warp][group][8 + 2 * place]);
    // O^T += V^T P^T: V's A fragments transposed out of its rows, 16 dimensions a load.
#pragma unroll
    for (int m = 0; m < D / 16; ++m) {
      const int r = (lane / 16) * 8 + lane % 8, c = 2 * m + (lane / 8) % 2;  // d low | high, then keys 0-7 | 8-15
      unsigned va[4];
      load_matrices_x4<true>(va, vt + r * ROW + (c ^ (r & 7)));
      mma_16x8x16<T>(acc[m], va, pb0, pb1);
    }
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], 4);
    sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], 8);
    sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], 16);
  }
  wait_async_copies<0>();
  __syncthreads();  // s_acc below takes the tiles' place
  float(*s_acc)[G][D] = reinterpret_cast<float(*)[G][D]>(decode_attention_shared);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int head = 2 * place + j;
    if (head < G) {
      if (group == 0) {
        s_max[warp][head] = best[j];
        s_sum[warp][head] = sum[j];
      }
#pragma unroll
      for (int m = 0; m < D / 16; ++m) {
        s_acc[warp][head][16 * m + group] = acc[m][j];
        s_acc[warp][head][16 * m + group + 8] = acc[m][2 + j];
      }
    }
  }
  __syncthreads();
  T* o = static_cast<T*>(a.o) + (std::int64_t(b) * a.q_heads + std::int64_t(h) * G) * D;
  const std::int64_t slot = (std::int64_t(b) * a.kv_heads + h) * a.chunks;  // this head's first chunk
  for (int i = tid; i < G * D; i += decode_attention_threads) {
    const int g = i / D, d = i % D;
    float top = -INFINITY;
    for (int w = 0; w < W; ++w) top = fmaxf(top, s_max[w][g]);
    float total = 0, weighted = 0;
    for (int w = 0; w < W; ++w) {
      if (s_max[w][g] == -INFINITY) continue;  // a warp without a tile
      const float f = exp2f(s_max[w][g] - top);
      total += s_sum[w][g] * f;
      weighted += s_acc[w][g][d] * f;
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

template <class T, int D, int G>
void launch_decode_attention_kernel(const decode_attention_args& a, dim3 grid, cudaStream_t stream, launch_order order) {
  // Past the 48 KB a block gets unasked; set on every launch, since the attribute belongs to the
  // current device's context: 0.34 us of host time on an H100 machine, the capability check 0.06
  // (lab/probes/launch_api_cost.cu); a graph pays them at capture only.
  constexpr int bytes = decode_attention_shared_bytes<D>;
  GPUCMP_CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<T, D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  launch_kernel(decode_attention_kernel<T, D, G>, grid, dim3(decode_attention_threads), std::size_t(bytes), stream, order,
                "decode attention", a);
}

template <class T, int D>
void launch_decode_attention_for(const decode_attention_args& a, int group, dim3 grid, cudaStream_t stream, launch_order order) {
  switch (group) {
    case 1: return launch_decode_attention_kernel<T, D, 1>(a, grid, stream, order);
    case 2: return launch_decode_attention_kernel<T, D, 2>(a, grid, stream, order);
    case 4: return launch_decode_attention_kernel<T, D, 4>(a, grid, stream, order);
    case 8: return launch_decode_attention_kernel<T, D, 8>(a, grid, stream, order);
  }
  throw invalid_argument("decode attention: " + std::to_string(group) + " query heads a KV head (1, 2, 4 or 8)");
}

}  // namespace detail

/// Whether the current device runs the decode kernel (compute capability 8.0 or later).
inline bool decode_attention_runs_here() {
  int device = 0, major = 0;
  GPUCMP_CUDA_CHECK(cudaGetDevice(&device));
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

/// Enqueues the split-KV decode kernel for `p` (decode_attention_applies()) at chunks of
/// `chunk` keys on `a`'s operands; a.partials and a.arrivals as decode_attention_partial_floats()
/// and batch x kv_heads need (unused at one chunk). Throws invalid_argument where it does not apply.
inline void launch_decode_attention(const attention_problem& p, decode_attention_args a, std::int64_t chunk, cudaStream_t stream,
                                    launch_order order = launch_order::serial) {
  if (!decode_attention_applies(p)) throw invalid_argument("decode attention: does not compute " + p.name());
  if (chunk < p.seq_kv && (chunk < 1 || chunk % detail::decode_attention_tile != 0)) {
    throw invalid_argument("decode attention: chunks of " + std::to_string(chunk) + " keys (a multiple of " +
                           std::to_string(detail::decode_attention_tile) + ", or the whole sequence)");
  }
  if (!decode_attention_runs_here()) {
    throw invalid_argument("decode attention: needs compute capability 8.0 or later (tensor-core fragments)");
  }
  a.seq_kv = int(p.seq_kv);
  a.page_size = int(p.page_size);
  a.page_shift = 0;
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
