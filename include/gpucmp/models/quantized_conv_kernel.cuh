// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp's own tensor-core kernel for a quantized convolution (INT8, and FP8 E4M3 from compute
// capability 8.9): one of the ways models/quantized_conv.cuh runs a layer. In NHWC with KRSC
// filters a convolution is an implicit GEMM, y (pixels x K) = x' (pixels x R S C) w^T, whose
// operands are contiguous along the reduction (tap, channel), which is mma.sync's "row.col"
// layout: each 16-byte piece of a block of 64 reduced elements is 16 channels of one filter
// tap, read straight from x at the pixel the tap, stride and padding point to (zeros outside),
// so a 3x3 layer over 64 channels reduces one tap per block and a stem over 16 four. The whole
// epilogue runs before anything is written:
//   y = quantize(act(sum * dequantize[k] + bias[k] (+ z * z_scale)) * output_scale)
// Why a kernel of our own: ResNet-50's first stage is memory-bound (C or K 64, 56x56 pixels),
// and cuDNN's INT8 engines ran those layers at about a third of an H100's bandwidth, no faster
// than FP16; this kernel runs the widening 1x1 layers with a residual 1.3x (batch 32) to 1.4x
// (256) faster than cuDNN there (docs/results/h100-quantized.md). Each block streams x and w
// through a multi-stage cp.async pipeline while it prefetches its tile of z, multiplies with
// mma.sync (sm_80 on) or, built as sm_90a, with Hopper's wgmma (cuda/warpgroup_mma.cuh), then
// adds, rounds and stores y in 16-byte rows from shared memory; an overlapped tile's block
// walks several tiles of rows and has the next one's loads in flight while it stores. Its tile
// shapes are the candidates; the layer's search times them beside cuDNN's plans and keeps the
// fastest that verifies.
#pragma once

#include <gpucmp/cuda/async_copy.cuh>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/fast_divisor.cuh>
#include <gpucmp/cuda/warp_mma.cuh>
#include <gpucmp/cuda/warpgroup_mma.cuh>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/elements.cuh>

#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

/// The pointers one launch reads and writes (NHWC; w K x R x S x C), and the layer's scales as
/// quantized_conv_tensors holds them. `z` and `z_scale` are null without a residual.
struct quantized_kernel_operands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
  const float* dequantize = nullptr;    ///< K
  const float* bias = nullptr;          ///< K
  const float* z_scale = nullptr;       ///< 1
  const float* output_scale = nullptr;  ///< 1
};

/// A block's tile: BM pixels x BN output channels, reduced 64 elements (filter tap, channel) at a
/// time through `stages` shared-memory buffers, by warps_m x warps_n warps, built for
/// `blocks_per_sm` blocks on each multiprocessor at once (the registers a thread may use). With
/// `warpgroup` the warps multiply with wgmma, four at a time (warps_m / 4 warpgroups over the
/// rows, warps_n 1), where the GPU has it (warpgroup_mma_compiled); else each warp with mma.sync.
/// With `overlapped` the grid holds only the blocks the GPU runs at once, each walking several
/// tiles of rows and issuing the next tile's loads of x and z before it finishes this one.
struct quantized_kernel_tile {
  int bm, bn, warps_m, warps_n, stages, blocks_per_sm;
  bool warpgroup;
  bool overlapped = false;
};

/// The tiles a layer's search tries (as with_quantized_kernel_tile instantiates them).
/// mma.sync, widest output first: 64 x 256 reads each input row once for K = 256; 128 x 64
/// keeps K = 64 layers' tiles full, three blocks a multiprocessor keeping more loads in flight
/// where a layer streams its input; 64 x 64 gives layers of few pixels (a late stage at a small
/// batch) enough blocks to fill the GPU. (A fourth stage for 128 x 128 and 128 x 64 measured no
/// faster on an H100: the compute-bound layers do not wait on the loads.) wgmma (Hopper):
/// 128 x 128 and 128 x 256 for wide layers, 128 x 64 for K = 64, and 256 x 64, which reads a
/// K = 64 layer's filters half as often; four stages, as one block's products still run while
/// the next block's loads are issued. Overlapped (mma.sync's 128 x 128 and 128 x 64 again): a
/// layer that reduces only 64 or 128 channels (stage 1's and 2's 1x1 layers) has one or two
/// blocks to reduce, so a block otherwise loads, multiplies and stores in turn with nothing in
/// flight while it stores; on the H200 those layers moved a third of the copy rate
/// (docs/results/h200-quantized.md).
inline constexpr quantized_kernel_tile quantized_kernel_tiles[] = {
    {128, 128, 2, 4, 3, 2, false},      {64, 256, 2, 4, 3, 2, false},      {128, 64, 4, 2, 3, 3, false},
    {64, 64, 2, 2, 4, 4, false},        {128, 128, 8, 1, 4, 2, true},      {128, 256, 8, 1, 4, 1, true},
    {128, 64, 4, 1, 4, 3, true},        {256, 64, 8, 1, 4, 2, true},       {128, 128, 2, 4, 3, 2, false, true},
    {128, 64, 4, 2, 3, 3, false, true}};

namespace detail {

struct quantized_kernel_args {
  const unsigned char* x;
  const unsigned char* w;
  const unsigned char* z;  // null: no residual
  unsigned char* y;
  const float* dequantize;
  const float* bias;
  const float* z_scale;
  const float* output_scale;
  int pixels;               // N x P x Q: the GEMM's rows (x, w and the pixels lie within 32 bits)
  int c, k;                 // input channels, output channels
  int reduction;            // R x S x C: the GEMM's inner dimension, w's row
  int height, width;        // input plane
  fast_divisor plane, row;  // P x Q and Q: a pixel's image and output row
  int s;                    // filter taps along a row
  int stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int stages_used;  // min(stages, the blocks of 64 reduced elements): the buffers the shared memory holds
  int grid_rows;    // overlapped tiles: the blocks along the rows (those the GPU runs at once)
  bool relu;
};

// A stage's row of x or w: 64 bytes of the reduction in four 16-byte pieces. For mma.sync rows
// are padded to 80 bytes (ldmatrix's 8 rows then hit 8 bank groups); for wgmma they lie as its
// 8 x 16-byte core matrices, each group of 8 rows 512 bytes with a row's pieces 128 apart.
template <bool Warpgroup>
inline constexpr int quantized_kernel_row_bytes = Warpgroup ? 64 : 80;
template <bool Warpgroup>
__device__ constexpr int quantized_tile_offset(int row, int piece) {
  return Warpgroup ? (row / 8) * 512 + piece * 128 + (row % 8) * 16 : row * 80 + piece * 16;
}

// Two stored 8-bit values (the lower address in the low byte) as floats, exactly.
template <class Stored>
__device__ inline float2 stored_pair_values(unsigned short bits) {
  if constexpr (std::is_same_v<Stored, std::int8_t>) {
    return make_float2(float(static_cast<std::int8_t>(bits & 0xff)), float(static_cast<std::int8_t>(bits >> 8)));
  } else {
    return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(bits, __NV_E4M3)));
  }
}
// Two floats rounded to the nearest stored value, saturated to its finite range (INT8: ties to
// even, as rintf; FP8: cuda_fp8.h's conversion), packed as stored_pair_values reads them.
template <class Stored>
__device__ inline unsigned short stored_pair_bits(float low, float high) {
  if constexpr (std::is_same_v<Stored, std::int8_t>) {
    int lo, hi;  // cvt to s8 clamps to -128..127 in one instruction
    asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(lo) : "f"(low));
    asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(hi) : "f"(high));
    return static_cast<unsigned short>(__byte_perm(lo, hi, 0x0040));
  } else {
    return __nv_cvt_float2_to_fp8x2(make_float2(low, high), __NV_SATFINITE, __NV_E4M3);
  }
}

// WM x WN warps, each multiplying a (BM / WM) x (BN / WN) tile with mma.sync; or with
// `Warpgroup` WM / 4 warpgroups (WN 1), each multiplying BM / (WM / 4) rows by all BN columns
// with wgmma, 64 rows an instruction. A block makes the tiles of rows blockIdx.y, + gridDim.y,
// ... (one unless `Overlapped`: then each tile's successor has its z and first blocks of x and
// w in flight while the tile is finished and stored, from a second tile of shared memory).
template <class Stored, int BM, int BN, int WM, int WN, int Stages, int BlocksPerSM, bool Warpgroup, bool Overlapped>
__global__ void __launch_bounds__(WM* WN * 32, BlocksPerSM) quantized_conv_kernel(quantized_kernel_args a) {
#if __CUDA_ARCH__ >= 800
  using Sum = std::conditional_t<std::is_same_v<Stored, std::int8_t>, int, float>;
  constexpr int threads = WM * WN * 32, row_bytes = quantized_kernel_row_bytes<Warpgroup>;
  constexpr int warp_rows = BM / WM, warp_cols = BN / WN, group_rows = Warpgroup ? BM / (WM / 4) : 0;
  // Each thread's sums: MT x NT pieces of 16 x 8 (mma.sync's), or MT slices of 64 rows by BN / 8
  // pieces of 8 columns (wgmma's), 4 values each.
  constexpr int MT = Warpgroup ? group_rows / 64 : warp_rows / 16, NT = Warpgroup ? BN / 8 : warp_cols / 8;
  constexpr int a_loads = BM * 4 / threads, b_loads = BN * 4 / threads;  // 16-byte pieces, 4 per row
  constexpr int out_stride = BN + 16, out_pieces = BN / 16;
  // Blocks of the reduction loaded ahead: wgmma keeps one block's products running while the
  // next is issued, so the buffer it reads is refilled a block later.
  constexpr int ahead = Warpgroup ? Stages - 2 : Stages - 1;
  static_assert(!Warpgroup || (WN == 1 && WM % 4 == 0 && group_rows % 64 == 0 && (BN == 64 || BN == 128 || BN == 256)),
                "wgmma: warpgroups of 4 warps, 64 rows a slice, N 64, 128 or 256");
  static_assert(Warpgroup || (warp_rows % 16 == 0 && warp_cols % 16 == 0), "mma.sync: a tile the warps divide evenly");
  static_assert(a_loads * threads == BM * 4 && b_loads * threads == BN * 4 && threads % 32 == 0 && ahead >= 1,
                "loads the threads divide evenly");
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int stage_bytes = (BM + BN) * row_bytes;
  // Where a tile's z arrives and its y leaves from: one, or (overlapped) two taken in turn.
  auto out_tile = [&](int buffer) { return shared + a.stages_used * stage_bytes + buffer * (BM * out_stride); };

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int n0 = blockIdx.x * BN;
  const int k_tiles = (a.reduction + 63) / 64, m_tiles = (a.pixels + BM - 1) / BM;

  // This thread's rows of w (-1: past K), and where its rows of x start before a tap moves
  // them (the offset of the pixel at tap (0, 0), which may lie in the padding; a top far above
  // any tap's reach: past the tensor); their pieces outside x or the reduction are loaded as
  // zeros.
  const int piece = tid % 4;
  int x_top[a_loads], x_left[a_loads], x_row[a_loads], w_row[b_loads];
#pragma unroll
  for (int j = 0; j < b_loads; ++j) {
    const int channel = n0 + tid / 4 + j * (threads / 4);
    w_row[j] = channel < a.k ? channel * a.reduction : -1;
  }

  // The blocks load in order, so this thread's piece walks the reduction with a cursor: 16
  // channels from `at` of filter tap (tap_r, tap_s), `flat` elements in (C is a multiple of 16:
  // a piece never straddles two taps). No division per block.
  int flat = 0, tap = 0, at = 0, tap_r = 0, tap_s = 0;  // start_tile sets them
  auto load_tile = [&](int stage) {
    unsigned char* xs = shared + stage * stage_bytes;
    unsigned char* ws = xs + BM * row_bytes;
    const int dy = tap_r * a.dilation_h, dx = tap_s * a.dilation_w;
    const int moved = (dy * a.width + dx) * a.c + at;  // the tap's offset, the same for every row
    const bool in_reduction = flat < a.reduction;
#pragma unroll
    for (int i = 0; i < a_loads; ++i) {
      const int y = x_top[i] + dy, x = x_left[i] + dx;
      const bool valid = in_reduction && unsigned(y) < unsigned(a.height) && unsigned(x) < unsigned(a.width);
      copy_16_async(xs + quantized_tile_offset<Warpgroup>(tid / 4 + i * (threads / 4), piece),
                    valid ? a.x + x_row[i] + moved : a.x, valid);
    }
#pragma unroll
    for (int j = 0; j < b_loads; ++j) {
      const bool valid = in_reduction && w_row[j] >= 0;
      copy_16_async(ws + quantized_tile_offset<Warpgroup>(tid / 4 + j * (threads / 4), piece),
                    valid ? a.w + w_row[j] + flat : a.w, valid);
    }
    flat += 64;
    for (at += 64; at >= a.c; at -= a.c) {
      if (++tap_s == a.s) {
        tap_s = 0;
        ++tap_r;
      }
    }
  };
  // Starts the tile of rows from m0: its rows of x, z's tile into `out` (it arrives while the
  // sums are made), the cursor, and the first `ahead` blocks of the reduction.
  auto start_tile = [&](int m0, unsigned char* out) {
#pragma unroll
    for (int i = 0; i < a_loads; ++i) {
      const int m = m0 + tid / 4 + i * (threads / 4);
      x_top[i] = -(1 << 30);  // no tap reaches 2^20 rows down (quantized_kernel_refusal)
      x_left[i] = x_row[i] = 0;
      if (m < a.pixels) {
        const int n = a.plane.divide(m), in_plane = m - n * a.plane.divisor(), pp = a.row.divide(in_plane);
        x_top[i] = pp * a.stride_h - a.pad_h;
        x_left[i] = (in_plane - pp * a.row.divisor()) * a.stride_w - a.pad_w;
        x_row[i] = ((n * a.height + x_top[i]) * a.width + x_left[i]) * a.c;
      }
    }
    if (a.z != nullptr) {
      for (int i = tid; i < BM * out_pieces; i += threads) {
        const int row = i / out_pieces, col = (i % out_pieces) * 16, m = m0 + row;
        const bool valid = m < a.pixels && n0 + col < a.k;
        copy_16_async(out + row * out_stride + col, valid ? a.z + std::int64_t(m) * a.k + n0 + col : a.z, valid);
      }
    }
    commit_async_copies();
    flat = piece * 16;
    tap = flat / a.c;
    at = flat - tap * a.c;
    tap_r = tap / a.s;
    tap_s = tap - tap_r * a.s;
#pragma unroll
    for (int s = 0; s < ahead; ++s) {
      if (s < k_tiles) load_tile(s);
      commit_async_copies();
    }
  };

  // mma.sync: warp (warp / WN, warp % WN) of the grid; wgmma: warpgroup warp / 4, whose warp
  // warp % 4 holds 16 rows of each 64.
  const int warp_m = Warpgroup ? (warp / 4) * group_rows : (warp / WN) * warp_rows;
  const int warp_n = Warpgroup ? 0 : (warp % WN) * warp_cols;
  const int first_tile = int(blockIdx.y), tile_step = int(gridDim.y);
  int buffer = 0;
  start_tile(first_tile * BM, out_tile(0));
  for (int tile = first_tile; tile < m_tiles; tile += tile_step, buffer ^= 1) {
    const int m0 = tile * BM;
    Sum acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = Sum(0);

    for (int kt = 0; kt < k_tiles; ++kt) {
      wait_async_copies<ahead - 1>();  // z and blocks 0..kt have landed
      if constexpr (Warpgroup) fence_shared_for_async_proxy();  // where wgmma reads them
      __syncthreads();  // every thread's copies are in, and every warp is done with the buffer refilled next
      const unsigned char* xs = shared + (kt % Stages) * stage_bytes;
      const unsigned char* ws = xs + BM * row_bytes;
      if constexpr (Warpgroup) {
        auto& sums = reinterpret_cast<Sum(&)[MT * NT * 4]>(acc);
        warpgroup_hold(sums);
        warpgroup_mma_fence();
#pragma unroll
        for (int step = 0; step < 2; ++step) {  // two steps of 32 channels: core matrices 2 step, 2 step + 1
          const std::uint64_t b = shared_matrix_descriptor(ws + step * 256, 128, 512);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const std::uint64_t x_slice = shared_matrix_descriptor(xs + (warp_m + mt * 64) * 64 + step * 256, 128, 512);
            warpgroup_mma_64xNx32<BN>(reinterpret_cast<Sum(&)[NT * 4]>(acc[mt]), x_slice, b);
          }
        }
        warpgroup_mma_commit();
        warpgroup_hold(sums);
        // Block kt + ahead goes where block kt - 2 was: every warpgroup waited for its products
        // (below, one iteration back) before this iteration's barrier.
        if (kt + ahead < k_tiles) load_tile((kt + ahead) % Stages);
        commit_async_copies();
        warpgroup_mma_wait<1>();  // block kt - 1's products are done; kt's may run on
        warpgroup_hold(sums);
      } else {
        if (kt + ahead < k_tiles) load_tile((kt + ahead) % Stages);  // into block kt - 1's buffer, in order
        commit_async_copies();
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // two steps of 32 channels
          unsigned af[MT][4], bf[NT][2];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            // Matrices: rows 0-7 and 8-15 at channels 0-15, then both at 16-31.
            const int row = warp_m + mt * 16 + lane % 8 + (lane / 8) % 2 * 8;
            load_matrices_x4<false>(af[mt], xs + row * row_bytes + half * 32 + lane / 16 * 16);
          }
#pragma unroll
          for (int np = 0; np < NT / 2; ++np) {
            // Matrices: channels 0-7 at 0-15 and 16-31, then channels 8-15 at both.
            const int row = warp_n + np * 16 + lane % 8 + lane / 16 * 8;
            unsigned r[4];
            load_matrices_x4<false>(r, ws + row * row_bytes + half * 32 + (lane / 8) % 2 * 16);
            bf[2 * np][0] = r[0];
            bf[2 * np][1] = r[1];
            bf[2 * np + 1][0] = r[2];
            bf[2 * np + 1][1] = r[3];
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_16x8x32(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
        }
      }
    }
    if constexpr (Warpgroup) {
      warpgroup_mma_wait<0>();
      warpgroup_hold(reinterpret_cast<Sum(&)[MT * NT * 4]>(acc));
    }
    if constexpr (!Overlapped) {
      wait_async_copies<0>();
      __syncthreads();
    }  // (overlapped: z landed before block 0, at the first iteration's wait, and nothing else is in flight)
    unsigned char* out = out_tile(buffer);

    // Each thread holds rows g and g + 8, channels 2t and 2t + 1 of every 8 columns, in each
    // slice of 16 rows (mma.sync) or 64 (wgmma, the warp's 16 of them). The output's scale is
    // folded into the per-channel constants and z's (it is positive, so it commutes with ReLU):
    // per output a convert, a multiply-add, z's convert and multiply-add, a max and the rounding
    // convert. Channels outer: a channel's constants are read once, not held for every column.
    const int g = lane / 4, t = lane % 4, row0 = warp_m + (Warpgroup ? (warp % 4) * 16 : 0) + g;
    constexpr int slice_rows = Warpgroup ? 64 : 16;
    const float out_scale = *a.output_scale;
    auto finish = [&](auto with_z, auto with_relu) {
      constexpr bool has_z = decltype(with_z)::value, relu = decltype(with_relu)::value;
      const float zs = has_z ? *a.z_scale * out_scale : 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = warp_n + nt * 8 + 2 * t, channel = n0 + col;
        float dq[2], b[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          dq[e] = channel + e < a.k ? a.dequantize[channel + e] * out_scale : 0.0f;
          b[e] = channel + e < a.k ? a.bias[channel + e] * out_scale : 0.0f;
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            auto* cell = reinterpret_cast<unsigned short*>(out + (row0 + mt * slice_rows + h * 8) * out_stride + col);
            float v0 = float(acc[mt][nt][2 * h]) * dq[0] + b[0];
            float v1 = float(acc[mt][nt][2 * h + 1]) * dq[1] + b[1];
            if constexpr (has_z) {
              const float2 z = stored_pair_values<Stored>(*cell);
              v0 += z.x * zs;
              v1 += z.y * zs;
            }
            if constexpr (relu) {
              v0 = fmaxf(v0, 0.0f);
              v1 = fmaxf(v1, 0.0f);
            }
            *cell = stored_pair_bits<Stored>(v0, v1);
          }
      }
    };
    if (a.z != nullptr) {
      a.relu ? finish(std::true_type{}, std::true_type{}) : finish(std::true_type{}, std::false_type{});
    } else {
      a.relu ? finish(std::false_type{}, std::true_type{}) : finish(std::false_type{}, std::false_type{});
    }
    __syncthreads();
    // Every warp is done with the stages and this tile's sums: the next tile's loads go out,
    // into the stages and the other out tile, while this one's y is stored.
    if constexpr (Overlapped) {
      if (tile + tile_step < m_tiles) start_tile((tile + tile_step) * BM, out_tile(buffer ^ 1));
    }
    for (int i = tid; i < BM * out_pieces; i += threads) {
      const int row = i / out_pieces, col = (i % out_pieces) * 16, m = m0 + row;
      if (m < a.pixels && n0 + col < a.k) {
        *reinterpret_cast<uint4*>(a.y + std::int64_t(m) * a.k + n0 + col) =
            *reinterpret_cast<const uint4*>(out + row * out_stride + col);
      }
    }
    if constexpr (!Overlapped) break;  // one tile: no state kept for another (no registers spent on it)
  }  // the block's next tile of rows
#else
  __trap();  // the host refuses below compute capability 8.0
#endif
}

// One tile's kernel: its shared memory, grid and launch.
template <class Stored, int BM, int BN, int WM, int WN, int Stages, int BlocksPerSM, bool Warpgroup, bool Overlapped>
struct quantized_kernel_launcher {
  static constexpr int threads = WM * WN * 32;
  static constexpr auto kernel = quantized_conv_kernel<Stored, BM, BN, WM, WN, Stages, BlocksPerSM, Warpgroup, Overlapped>;
  static int stages_used(const quantized_kernel_args& a) { return std::min(Stages, (a.reduction + 63) / 64); }
  static std::size_t shared_bytes(int stages) {
    return std::size_t(stages) * (BM + BN) * quantized_kernel_row_bytes<Warpgroup> +
           std::size_t(Overlapped ? 2 : 1) * BM * (BN + 16);
  }
  static void prepare() {
    GPUCMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes(Stages))));
  }
  /// The blocks along the rows for `a`'s shape on a GPU of `multiprocessors`: one per tile of
  /// rows, or (overlapped) as many as run at once beside the columns' blocks; 0 where one per
  /// tile would pass a grid's 65,535 (only overlapped blocks walk).
  static int grid_rows(const quantized_kernel_args& a, int multiprocessors) {
    const int m_tiles = (a.pixels + BM - 1) / BM, n_tiles = (a.k + BN - 1) / BN;
    if (!Overlapped) return m_tiles <= 65535 ? m_tiles : 0;
    int resident = 0;
    GPUCMP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, threads, shared_bytes(stages_used(a))));
    return std::clamp(std::max(resident, 1) * multiprocessors / n_tiles, 1, m_tiles);
  }
  static void launch(quantized_kernel_args a, cudaStream_t stream) {
    a.stages_used = stages_used(a);
    const dim3 grid(unsigned((a.k + BN - 1) / BN), unsigned(a.grid_rows));
    kernel<<<grid, threads, shared_bytes(a.stages_used), stream>>>(a);
    GPUCMP_CUDA_CHECK_LAST("quantized_conv_kernel");
  }
};

// Tile I's launcher, its shape read from quantized_kernel_tiles (the one list of tiles).
template <class Stored, std::size_t I>
using quantized_tile_launcher =
    quantized_kernel_launcher<Stored, quantized_kernel_tiles[I].bm, quantized_kernel_tiles[I].bn,
                              quantized_kernel_tiles[I].warps_m, quantized_kernel_tiles[I].warps_n,
                              quantized_kernel_tiles[I].stages, quantized_kernel_tiles[I].blocks_per_sm,
                              quantized_kernel_tiles[I].warpgroup, quantized_kernel_tiles[I].overlapped>;

template <class Stored, class F, std::size_t... I>
void with_quantized_kernel_tile(std::size_t i, F&& f, std::index_sequence<I...>) {
  const bool found = ((i == I ? (f(quantized_tile_launcher<Stored, I>{}), true) : false) || ...);
  if (!found) throw invalid_argument("gpucmp's quantized conv kernel: no tile " + std::to_string(i));
}
// Calls f with tile i's launcher (quantized_kernel_tiles' order).
template <class Stored, class F>
void with_quantized_kernel_tile(std::size_t i, F&& f) {
  with_quantized_kernel_tile<Stored>(i, f, std::make_index_sequence<std::size(quantized_kernel_tiles)>{});
}

}  // namespace detail

/// Why gpucmp's kernel does not run `p` on a GPU of compute capability `major`.`minor` ("" when
/// it does): INT8 from 8.0 or FP8 E4M3 from 8.9, NHWC, one group, C and K multiples of 16
/// (16-byte rows), sizes within 32 bits, filters reaching fewer than 2^20 pixels.
inline std::string quantized_kernel_refusal(const conv_problem& p, int major, int minor) {
  const int capability = major * 10 + minor;
  if (p.dtype == numerics::int8) {
    if (capability < 80) return "gpucmp's kernel needs compute capability 8.0 for INT8 mma.sync";
  } else if (p.dtype == numerics::fp8_e4m3) {
    if (capability < 89) return "gpucmp's kernel needs compute capability 8.9 for FP8 mma.sync";
  } else {
    return std::string("gpucmp's kernel runs INT8 and FP8 E4M3 layers, not ") + to_string(p.dtype);
  }
  if (p.layout != conv_layout::nhwc) return "gpucmp's kernel needs NHWC";
  if (p.groups != 1) return "gpucmp's kernel runs ungrouped convolutions only";
  if (p.c % 16 != 0 || p.k % 16 != 0) return "gpucmp's kernel needs C and K multiples of 16";
  if (double(p.n) * double(p.h) * double(p.w) * double(p.c) > 2e9 || double(p.k) * double(p.r * p.s * p.c) > 2e9 ||
      double(p.n) * double(p.p()) * double(p.q()) > 2e9) {
    return "gpucmp's kernel needs x, w and the output's pixels within 32 bits";
  }
  if (p.r * p.dilation_h >= (1 << 20) || p.s * p.dilation_w >= (1 << 20)) {
    return "gpucmp's kernel needs filters reaching fewer than 2^20 pixels (R x dilation, S x dilation)";
  }
  return "";
}

/// The tiles gpucmp's kernel runs one (shape, epilogue) with: the candidates of its path.
class quantized_conv_kernels {
 public:
  /// Throws unsupported naming why when the current device cannot run `p` this way
  /// (quantized_kernel_refusal). Tiles more than twice as wide as K are left out, all but the
  /// narrowest of each kind, wgmma's where the program's code for this GPU lacks it, and where
  /// the pixels need more than 65,535 tiles of rows (a grid's limit) all but the overlapped.
  quantized_conv_kernels(const conv_problem& p, bool relu) : m_problem(p) {
    int device = 0, major = 0, minor = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&device));
    GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (const std::string why = quantized_kernel_refusal(p, major, minor); !why.empty()) throw unsupported(why);
    int multiprocessors = 0;
    GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    // What every launch passes but the pointers and the grid, prepared once.
    detail::quantized_kernel_args& a = m_shape;
    a.pixels = int(p.n * p.p() * p.q());
    a.c = int(p.c);
    a.k = int(p.k);
    a.reduction = int(p.r * p.s * p.c);
    a.height = int(p.h);
    a.width = int(p.w);
    a.plane = fast_divisor(p.p() * p.q());
    a.row = fast_divisor(p.q());
    a.s = int(p.s);
    a.stride_h = int(p.stride_h);
    a.stride_w = int(p.stride_w);
    a.pad_h = int(p.pad_h);
    a.pad_w = int(p.pad_w);
    a.dilation_h = int(p.dilation_h);
    a.dilation_w = int(p.dilation_w);
    a.relu = relu;
    const bool warpgroup = warpgroup_mma_compiled();
    int narrowest[2] = {quantized_kernel_tiles[0].bn, quantized_kernel_tiles[0].bn};  // mma.sync's, wgmma's
    for (const quantized_kernel_tile& t : quantized_kernel_tiles) narrowest[t.warpgroup] = std::min(narrowest[t.warpgroup], t.bn);
    for (std::size_t i = 0; i < std::size(quantized_kernel_tiles); ++i) {
      const quantized_kernel_tile& t = quantized_kernel_tiles[i];
      if (t.warpgroup && !warpgroup) continue;
      if (t.bn > 2 * p.k && t.bn != narrowest[t.warpgroup]) continue;
      int rows = 0;
      on_tile(i, [&](auto launcher) {
        decltype(launcher)::prepare();
        rows = decltype(launcher)::grid_rows(a, multiprocessors);
      });
      if (rows > 0) m_tiles.push_back({i, rows});
    }
  }

  /// How many candidates there are.
  std::size_t size() const noexcept { return m_tiles.size(); }
  /// Candidate `i`: "128x128x64 tile, 2x4 warps, 3 stages, 2 blocks/SM, mma.sync m16n8k32 s8",
  /// "128x64x64 tile, 1 warpgroup, 4 stages, 3 blocks/SM, wgmma m64n64k32 s8", or with ",
  /// overlapped (264 blocks of rows)" where blocks walk several tiles of rows.
  std::string describe(std::size_t i) const {
    const quantized_kernel_tile& t = quantized_kernel_tiles[m_tiles.at(i).tile];
    const std::string format = m_problem.dtype == numerics::int8 ? "s8" : "e4m3";
    const std::string warps = t.warpgroup ? std::to_string(t.warps_m / 4) + (t.warps_m == 4 ? " warpgroup" : " warpgroups")
                                          : std::to_string(t.warps_m) + "x" + std::to_string(t.warps_n) + " warps";
    const std::string mma = t.warpgroup ? "wgmma m64n" + std::to_string(t.bn) + "k32 " : "mma.sync m16n8k32 ";
    return std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x64 tile, " + warps + ", " + std::to_string(t.stages) +
           " stages, " + std::to_string(t.blocks_per_sm) + " blocks/SM, " + mma + format +
           (t.overlapped ? ", overlapped (" + std::to_string(m_tiles.at(i).grid_rows) + " blocks of rows)" : "");
  }
  /// Whether `o`'s tensors suit the kernel's 16-byte loads and stores.
  static bool aligned(const quantized_kernel_operands& o) noexcept {
    auto at16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    return at16(o.x) && at16(o.w) && at16(o.y) && (o.z == nullptr || at16(o.z));
  }

  /// Enqueues candidate `i` on `stream`.
  void launch(std::size_t i, const quantized_kernel_operands& o, cudaStream_t stream) const {
    if (!aligned(o)) throw invalid_argument("gpucmp's quantized conv kernel: x, w, y and z must be 16-byte aligned");
    detail::quantized_kernel_args a = m_shape;
    a.x = static_cast<const unsigned char*>(o.x);
    a.w = static_cast<const unsigned char*>(o.w);
    a.z = static_cast<const unsigned char*>(o.z);
    a.y = static_cast<unsigned char*>(o.y);
    a.dequantize = o.dequantize;
    a.bias = o.bias;
    a.z_scale = o.z_scale;
    a.output_scale = o.output_scale;
    a.grid_rows = m_tiles.at(i).grid_rows;
    on_tile(m_tiles.at(i).tile, [&](auto launcher) { decltype(launcher)::launch(a, stream); });
  }

 private:
  template <class F>
  void on_tile(std::size_t tile, F&& f) const {
    if (m_problem.dtype == numerics::int8) {
      detail::with_quantized_kernel_tile<std::int8_t>(tile, f);
    } else {
      detail::with_quantized_kernel_tile<__nv_fp8_e4m3>(tile, f);
    }
  }

  struct candidate {
    std::size_t tile;  // index into quantized_kernel_tiles
    int grid_rows;     // the blocks along the rows for this problem
  };
  conv_problem m_problem;
  detail::quantized_kernel_args m_shape{};  // the problem's part of every launch's arguments
  std::vector<candidate> m_tiles;
};

}  // namespace gpucmp
