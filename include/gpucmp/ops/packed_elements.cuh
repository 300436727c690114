// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Sixteen bytes of elements moved as one load or store, for the memory-bound element-wise
// kernels of a training step (pooling, batch norm, gradient sums). On the H200 the scalar
// versions of those kernels, with 64-bit index arithmetic per element, ran at a fraction of
// the memory's speed (ResNet-50's stem max pooling: 4.7 ms backward at batch 256, where its
// bytes take about 0.15 ms). The float conversions are exact for FP32, FP16 and BF16 (and, for
// inference's pooling, INT8 and FP8) and round once on the way back, as the double ones in
// elements.cuh do, without their detour through double (16 conversions a clock on a
// multiprocessor).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace gpucmp {

/// `v` as a float (exact).
__host__ __device__ inline float to_float(float v) { return v; }
__host__ __device__ inline float to_float(__half v) { return __half2float(v); }                ///< see above
__host__ __device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }     ///< see above
__host__ __device__ inline float to_float(std::int8_t v) { return float(v); }                  ///< see above
__host__ __device__ inline float to_float(__nv_fp8_e4m3 v) { return float(v); }                ///< see above
__host__ __device__ inline float to_float(__nv_fp8_e5m2 v) { return float(v); }                ///< see above

/// `v` rounded to T (round to nearest even).
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

/// The types the packed kernels take.
template <class T>
inline constexpr bool packable_v =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Sixteen bytes of T: 4 FP32 or 8 FP16/BF16 elements, loaded and stored as one.
template <class T>
struct alignas(16) packed {
  static_assert(packable_v<T>, "packed: FP32, FP16 or BF16");
  static constexpr int width = int(16 / sizeof(T));
  T v[width];
};

/// Blocks of 256 threads for one thread per pack (the packed kernels' launch shape).
inline unsigned packed_blocks(std::int64_t threads) { return unsigned((threads + 255) / 256); }

/// True when every pointer given is 16-byte aligned or null (null: a tensor not used).
inline bool all_packable(std::initializer_list<const void*> pointers) noexcept {
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

}  // namespace gpucmp
