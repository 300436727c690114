// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// 16-byte loads and stores of FP32, FP16 and BF16 elements with FP32 arithmetic, for the
// memory-bound kernels (RMSNorm, RoPE, SwiGLU): one load moves 4 FP32 or 8 16-bit elements,
// the width at which a Hopper SM keeps enough bytes in flight to reach the copy rate.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace gpucmp {

/// An element's value in FP32 (exact for FP32, FP16 and BF16).
__host__ __device__ inline float to_float(float v) { return v; }
__host__ __device__ inline float to_float(__half v) { return __half2float(v); }          ///< see above
__host__ __device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }  ///< see above

/// `v` rounded to T (to nearest even).
template <class T>
__host__ __device__ inline T from_float(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    static_assert(std::is_same_v<T, float>, "from_float: FP32, FP16 or BF16");
    return v;
  }
}

/// Elements of T in one 16-byte vector.
template <class T>
inline constexpr int vector_elements = int(16 / sizeof(T));

/// Loads the 16-byte vector at `p` (16-byte aligned) as FP32 values.
template <class T>
__device__ inline void load_vector(const T* p, float (&out)[vector_elements<T>]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < vector_elements<T>; ++i) out[i] = to_float(e[i]);
}

/// Rounds `in` to T and stores it as the 16-byte vector at `p` (16-byte aligned).
template <class T>
__device__ inline void store_vector(T* p, const float (&in)[vector_elements<T>]) {
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < vector_elements<T>; ++i) e[i] = from_float<T>(in[i]);
  *reinterpret_cast<uint4*>(p) = raw;
}

}  // namespace gpucmp
