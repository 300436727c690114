// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// fast_divisor's multiply-and-shift against the division operator, on the host (the device
// runs the same arithmetic with __umulhi): every divisor up to 4096, each power of two and its
// neighbours up to 2^31 - 1, random ones; numerators at the edges of every quotient the test
// touches and up to 2^31 - 1.
#include "catch.hpp"

#include <gpucmp/cuda/fast_divisor.cuh>
#include <gpucmp/cuda/random.hpp>

#include <cstdint>
#include <vector>

namespace {

constexpr std::int64_t largest = (std::int64_t(1) << 31) - 1;

// Numerators where a quotient by d changes, and the ends of the range.
std::vector<std::int64_t> numerators_for(std::int64_t d, std::uint64_t seed) {
  std::vector<std::int64_t> n{0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, largest, largest - 1, largest - d, largest / d * d,
                              largest / d * d - 1};
  for (std::uint64_t i = 0; i < 24; ++i) {
    const std::int64_t q = std::int64_t(gpucmp::random_bits(seed, i) % std::uint64_t(largest / d + 1));
    n.push_back(q * d);
    n.push_back(q * d - 1);
    n.push_back(std::int64_t(gpucmp::random_bits(seed + 1, i) % std::uint64_t(largest + 1)));
  }
  return n;
}

void check_divisor(std::int64_t d, std::uint64_t seed) {
  const gpucmp::fast_divisor f(d);
  CHECK(f.divisor() == d);
  for (std::int64_t n : numerators_for(d, seed)) {
    if (n < 0 || n > largest) continue;
    INFO("n " << n << " / d " << d);
    REQUIRE(f.divide(int(n)) == n / d);
  }
}

}  // namespace

TEST_CASE("fast_divisor divides every 31-bit numerator exactly", "[unit][fast_divisor]") {
  for (std::int64_t d = 1; d <= 4096; ++d) check_divisor(d, std::uint64_t(d));
  for (int bit = 1; bit < 31; ++bit) {
    const std::int64_t p = std::int64_t(1) << bit;
    for (std::int64_t d : {p - 1, p, p + 1}) check_divisor(d, std::uint64_t(bit) * 7);
  }
  check_divisor(largest, 3);
  for (std::uint64_t i = 0; i < 2000; ++i) {
    check_divisor(1 + std::int64_t(gpucmp::random_bits(11, i) % std::uint64_t(largest)), i);
  }
}

TEST_CASE("fast_divisor refuses a divisor outside 1..2^31-1, by value", "[unit][fast_divisor]") {
  CHECK_THROWS_WITH(gpucmp::fast_divisor(0), GPUCMP_CONTAINS("divisor 0 outside"));
  CHECK_THROWS_WITH(gpucmp::fast_divisor(-3), GPUCMP_CONTAINS("divisor -3 outside"));
  CHECK_THROWS_WITH(gpucmp::fast_divisor(std::int64_t(1) << 31), GPUCMP_CONTAINS("divisor 2147483648 outside"));
  CHECK(gpucmp::fast_divisor(std::int64_t(1) << 30).divide(int(largest)) == 1);
}
