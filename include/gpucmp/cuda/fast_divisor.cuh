// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Division of a kernel's non-negative 32-bit indices by a divisor the host knows before the
// launch (a plane's width, its pixels), as a multiply-high and a shift: an integer division is
// a subroutine of a few dozen instructions on the GPU, and a kernel that turns each of its rows
// into (image, row, column) at every launch pays it per row.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cstdint>
#include <string>

namespace gpucmp {

/// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: with l = ceil(log2 d) and m = ceil(2^(31 + l) / d)
/// (which fits 32 bits), n / d = (n m) >> (31 + l) exactly (Granlund and Montgomery, "Division
/// by invariant integers using multiplication", 1994).
class fast_divisor {
 public:
  fast_divisor() = default;
  /// Throws invalid_argument naming `d` unless 1 <= d < 2^31.
  explicit fast_divisor(std::int64_t d) {
    if (d < 1 || d >= (std::int64_t(1) << 31)) {
      throw invalid_argument("fast_divisor: divisor " + std::to_string(d) + " outside 1..2^31-1");
    }
    m_divisor = int(d);
    int l = 0;
    while ((std::int64_t(1) << l) < d) ++l;
    m_multiplier = std::uint32_t(((std::uint64_t(1) << (31 + l)) + std::uint64_t(d) - 1) / std::uint64_t(d));
    m_shift = l - 1;  // after the high 32 bits of the product; d = 1 (l = 0) takes no multiply
  }

  __host__ __device__ int divisor() const { return m_divisor; }
  /// n / d, for 0 <= n < 2^31.
  __host__ __device__ int divide(int n) const {
    if (m_divisor == 1) return n;
#if defined(__CUDA_ARCH__)
    return int(__umulhi(unsigned(n), m_multiplier) >> m_shift);
#else
    return int((std::uint64_t(unsigned(n)) * m_multiplier) >> 32 >> m_shift);
#endif
  }

 private:
  int m_divisor = 1;
  std::uint32_t m_multiplier = 0;
  int m_shift = 0;
};

}  // namespace gpucmp
