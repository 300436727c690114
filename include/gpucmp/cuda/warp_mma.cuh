// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A warp's tensor-core matrix multiply (mma.sync m16n8k16, FP16 or BF16 in, FP32 out, sm_80
// on; m16n8k32, INT8 in, INT32 out, or FP8 E4M3 in, FP32 out, sm_89 on) and the shared-memory
// loads that fill its fragments (ldmatrix). A kernel that needs a few small products a warp
// (attention for one query token) or a tile of its own (a quantized convolution) uses these
// instead of a GEMM library.
// Fragment layouts are PTX's: in a warp, lane l's group is l / 4 and its place in the group l % 4.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace gpucmp {

/// Two values rounded to T (FP16 or BF16) in one 32-bit register, `low` in the low half (the
/// element with the smaller index in a fragment).
template <class T>
__device__ inline unsigned pack_pair(float low, float high) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "pack_pair: FP16 or BF16");
  unsigned bits;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 v = __floats2half2_rn(low, high);
    bits = *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
    bits = *reinterpret_cast<const unsigned*>(&v);
  }
  return bits;
}

/// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives the address of row
/// l % 8 of matrix l / 8 (16 bytes, 16-byte aligned); out[i] is matrix i's (row l / 4, columns
/// 2 (l % 4) and the next), or with `Transposed` its (rows 2 (l % 4) and the next, column l / 4).
template <bool Transposed>
__device__ inline void load_matrices_x4(unsigned (&out)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned at = unsigned(__cvta_generic_to_shared(row));
  if constexpr (Transposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(at));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(at));
  }
#else
  (void)row;
  out[0] = out[1] = out[2] = out[3] = 0;
  __trap();  // tensor-core fragments need sm_80
#endif
}

/// c += a b for a 16x16 A (row-major fragment, 4 registers of T pairs), a 16x8 B (column-major
/// fragment, b0 and b1) and a 16x8 FP32 accumulator (c0, c1: row l / 4; c2, c3: row l / 4 + 8;
/// columns 2 (l % 4) and the next).
template <class T>
__device__ inline void mma_16x8x16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_16x8x16: FP16 or BF16");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  (void)c;
  (void)a;
  (void)b0;
  (void)b1;
  __trap();  // tensor-core fragments need sm_80
#endif
}

/// c += a b for a 16x32 A of 8-bit elements (row-major fragment: 4 registers of 4), a 32x8 B
/// (column-major fragment, b0 and b1) and a 16x8 accumulator laid out as mma_16x8x16's: with
/// Sum int, INT32 sums of INT8; with Sum float, FP32 sums of FP8 E4M3 (compute capability 8.9
/// on; callers refuse FP8 below it).
template <class Sum>
__device__ inline void mma_16x8x32(Sum (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  static_assert(std::is_same_v<Sum, int> || std::is_same_v<Sum, float>, "mma_16x8x32: INT32 (INT8 in) or FP32 (FP8 in)");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<Sum, int>) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
#if __CUDA_ARCH__ >= 890
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // FP8 fragments need sm_89
#endif
  }
#else
  (void)c;
  (void)a;
  (void)b0;
  (void)b1;
  __trap();  // tensor-core fragments need sm_80
#endif
}

}  // namespace gpucmp
