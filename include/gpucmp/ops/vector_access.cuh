// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// 16-byte loads and stores of FP32, FP16 and BF16 elements with FP32 arithmetic, for the
// transformer block's memory-bound kernels (RMSNorm, RoPE, SwiGLU): one load moves 4 FP32 or
// 8 16-bit elements, the width at which a Hopper SM keeps enough bytes in flight to reach the
// copy rate. The pack and the conversions are packed_elements.cuh's.
#pragma once

#include <gpucmp/ops/packed_elements.cuh>

namespace gpucmp {

/// Elements of T in one 16-byte vector.
template <class T>
inline constexpr int vector_elements = packed<T>::width;

/// Loads the 16-byte vector at `p` (16-byte aligned) as FP32 values.
template <class T>
__device__ inline void load_vector(const T* p, float (&out)[vector_elements<T>]) {
  const packed<T> raw = *reinterpret_cast<const packed<T>*>(p);
#pragma unroll
  for (int i = 0; i < vector_elements<T>; ++i) out[i] = to_float(raw.v[i]);
}

/// Rounds `in` to T and stores it as the 16-byte vector at `p` (16-byte aligned).
template <class T>
__device__ inline void store_vector(T* p, const float (&in)[vector_elements<T>]) {
  packed<T> raw;
#pragma unroll
  for (int i = 0; i < vector_elements<T>; ++i) raw.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<packed<T>*>(p) = raw;
}

}  // namespace gpucmp
