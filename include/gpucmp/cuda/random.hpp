// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Deterministic, counter-based random values on the host: value i of a stream depends only on
// (seed, i), so any chunk can be generated independently and in parallel, and the same seed
// gives the same data on every machine. Used to fill device buffers without device code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

// Callable from device code too, so GPU-side fills produce the same values as host fills.
#if defined(__CUDACC__)
#define GPUCMP_HOST_DEVICE __host__ __device__
#else
#define GPUCMP_HOST_DEVICE
#endif

namespace gpucmp {

/// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
GPUCMP_HOST_DEVICE constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// 64 random bits for element `index` of the stream `seed`.
GPUCMP_HOST_DEVICE constexpr std::uint64_t random_bits(std::uint64_t seed, std::uint64_t index) noexcept {
  return mix64(mix64(seed) ^ index);
}

/// Uniform double in [0, 1) from the top 53 bits.
GPUCMP_HOST_DEVICE constexpr double unit_interval(std::uint64_t bits) noexcept {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

/// A closed range [low, high] of values to draw from; the defaults suit each type.
template <class T>
struct value_range {
  double low;   ///< smallest value
  double high;  ///< largest value (exclusive for floating types)
};

/// Default ranges: [-1, 1) for floating types (no overflow in low precision, signs mixed),
/// the whole range for integral types.
template <class T>
constexpr value_range<T> default_range() noexcept {
  if constexpr (std::is_integral_v<T>) {
    return {static_cast<double>(std::numeric_limits<T>::min()), static_cast<double>(std::numeric_limits<T>::max())};
  } else {
    return {-1.0, 1.0};
  }
}

/// Converts random bits to a value of T within `range`.
template <class T>
T random_value(std::uint64_t bits, value_range<T> range) noexcept {
  if constexpr (std::is_integral_v<T>) {
    const auto low = static_cast<long double>(range.low);
    const auto span = static_cast<long double>(range.high) - low + 1.0L;
    auto offset = static_cast<long double>(static_cast<std::uint64_t>(unit_interval(bits) * static_cast<double>(span)));
    if (offset >= span) offset = span - 1.0L;
    return static_cast<T>(low + offset);
  } else {
    const double v = range.low + unit_interval(bits) * (range.high - range.low);
    if constexpr (std::is_same_v<T, __half>) {
      return __double2half(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __double2bfloat16(v);
    } else {
      static_assert(std::is_floating_point_v<T>, "random_value: unsupported element type");
      return static_cast<T>(v);
    }
  }
}

/// Whether random_value<T> is defined for T.
template <class T>
inline constexpr bool is_random_fillable_v =
    std::is_arithmetic_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Fills host memory out[0..count) with values first_index.. of stream `seed`.
template <class T>
void generate_random(T* out, std::size_t count, std::uint64_t seed, std::uint64_t first_index,
                     value_range<T> range = default_range<T>()) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = random_value<T>(random_bits(seed, first_index + i), range);
}

}  // namespace gpucmp
