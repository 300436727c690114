// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Element types of the operations (FP64 ... FP8, INT8, INT32): conversion to double on host
// and device for references, and a GPU fill with deterministic random values, so operands of
// any size are filled at memory speed and never all zero.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpucmp {

/// An element's value as a double (exact for every type here).
__host__ __device__ inline double to_double(double v) { return v; }
__host__ __device__ inline double to_double(float v) { return v; }                 ///< see above
__host__ __device__ inline double to_double(__half v) { return __half2float(v); }   ///< see above
__host__ __device__ inline double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }  ///< see above
__host__ __device__ inline double to_double(__nv_fp8_e4m3 v) { return float(v); }  ///< see above
__host__ __device__ inline double to_double(__nv_fp8_e5m2 v) { return float(v); }  ///< see above
__host__ __device__ inline double to_double(std::int8_t v) { return v; }           ///< see above
__host__ __device__ inline double to_double(std::int32_t v) { return v; }          ///< see above

/// `v` rounded to T (round to nearest; saturating for FP8, truncating for integers).
template <class T>
__host__ __device__ inline T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __double2half(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __double2bfloat16(v);
  } else if constexpr (std::is_same_v<T, __nv_fp8_e4m3> || std::is_same_v<T, __nv_fp8_e5m2>) {
    return T(float(v));
  } else {
    return static_cast<T>(v);
  }
}

namespace detail {

/// `v` rounded to nearest into Stored and saturated: FP8 E4M3 at +-448, INT8 at -128..127.
template <class Stored>
__host__ __device__ inline Stored quantize_saturated(float v) {
  if constexpr (std::is_same_v<Stored, std::int8_t>) {
    return static_cast<std::int8_t>(fminf(fmaxf(rintf(v), -128.0f), 127.0f));
  } else {
    return Stored(v);  // cuda_fp8.h's conversion saturates to the largest finite value
  }
}

template <class T>
__global__ void fill_uniform_kernel(T* out, std::size_t count, std::uint64_t seed, double low, double high) {
  const bool integral = std::is_integral_v<T>;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double u = unit_interval(random_bits(seed, i));
    // Integers: uniform over low..high inclusive.
    const double v = integral ? low + double(std::int64_t(u * (high - low + 1))) : low + u * (high - low);
    out[i] = from_double<T>(v);
  }
}

}  // namespace detail

/// Fills `count` elements at `out` with random values uniform in [low, high) (integers: in
/// [low, high]); value i depends only on (seed, i). Asynchronous on `stream`.
template <class T>
void fill_uniform(T* out, std::size_t count, std::uint64_t seed, double low, double high, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = unsigned(std::min<std::size_t>((count + 255) / 256, 65536));
  detail::fill_uniform_kernel<T><<<blocks, 256, 0, stream>>>(out, count, seed, low, high);
  GPUCMP_CUDA_CHECK_LAST("fill_uniform kernel");
}

}  // namespace gpucmp
