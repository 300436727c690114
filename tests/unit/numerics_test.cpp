// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The element-type vocabulary and the recipes built from it: every table row agrees with
// the C++ type that holds it, every recipe names the type of each tensor, and what an
// operation derives from them (bytes, tolerances, peaks) follows the tensors' types.
#include "catch.hpp"

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/numerics.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

using gpucmp::element_type;
using gpucmp::numerics;

TEST_CASE("each element type's row agrees with the C++ type that holds it", "[ops][numerics]") {
  std::set<std::string> names;
  for (const gpucmp::element_info& e : gpucmp::element_types) {
    INFO(e.name);
    CHECK(gpucmp::parse_element_type(e.name) == e.type);
    CHECK(names.insert(e.name).second);
    const std::size_t held = gpucmp::visit_element(e.type, [](auto tag) { return sizeof(typename decltype(tag)::type); });
    CHECK(held == e.bytes);
    const bool integral = gpucmp::visit_element(e.type, [](auto tag) { return std::is_integral_v<typename decltype(tag)::type>; });
    CHECK(integral == !e.floating);
    CHECK(e.largest > 0);
    CHECK(e.smallest_subnormal > 0);
    CHECK(e.smallest_subnormal < e.largest);
  }
  CHECK(names.size() == gpucmp::element_type_count);
  // Against the standard library where it knows the type.
  CHECK(gpucmp::element_info_of(element_type::fp32).significand_bits == std::numeric_limits<float>::digits);
  CHECK(gpucmp::element_info_of(element_type::fp64).significand_bits == std::numeric_limits<double>::digits);
  CHECK(gpucmp::element_info_of(element_type::fp32).largest == double(std::numeric_limits<float>::max()));
  CHECK(gpucmp::element_info_of(element_type::fp32).smallest_subnormal == double(std::numeric_limits<float>::denorm_min()));
  CHECK(gpucmp::element_info_of(element_type::int8).largest == double(std::numeric_limits<std::int8_t>::max()));
  CHECK(gpucmp::element_info_of(element_type::int32).largest == double(std::numeric_limits<std::int32_t>::max()));
  // Rounding units: half a unit in the last place; integers are exact.
  CHECK(gpucmp::unit_roundoff(element_type::fp16) == std::ldexp(1.0, -11));
  CHECK(gpucmp::unit_roundoff(element_type::bf16) == std::ldexp(1.0, -8));
  CHECK(gpucmp::unit_roundoff(element_type::fp8_e4m3) == std::ldexp(1.0, -4));
  CHECK(gpucmp::unit_roundoff(element_type::int8) == 0.0);
  CHECK_THROWS_WITH(gpucmp::parse_element_type("fp4"), GPUCMP_CONTAINS("unknown element type 'fp4' (fp64, fp32, fp16"));
}

TEST_CASE("each recipe names the type of its input, weight, output, accumulator and scale", "[ops][numerics]") {
  std::set<std::string> names;
  for (const gpucmp::numerics_info& n : gpucmp::numerics_table) {
    INFO(n.name);
    CHECK(gpucmp::parse_numerics(n.name) == n.value);
    CHECK(names.insert(n.name).second);
    // Scales come with the FP8 recipes and only with them.
    CHECK(n.types.scale.has_value() == (n.rate == gpucmp::precision::fp8));
    // The GEMM's C++ storage types are the recipe's.
    gpucmp::visit_gemm_storage(n.value, [&](auto storage) {
      using S = decltype(storage);
      CHECK(sizeof(typename S::a_type) == gpucmp::element_bytes(n.types.input));
      CHECK(sizeof(typename S::b_type) == gpucmp::element_bytes(n.types.weight));
      CHECK(sizeof(typename S::c_type) == gpucmp::element_bytes(n.types.output));
      CHECK(sizeof(typename S::scalar_type) == gpucmp::element_bytes(n.types.accumulate));
    });
  }
  CHECK(names.size() == gpucmp::numerics_count);
  const gpucmp::tensor_types& int8 = gpucmp::types_of(numerics::int8);
  CHECK(int8.input == element_type::int8);
  CHECK(int8.output == element_type::int32);
  CHECK(int8.accumulate == element_type::int32);
  const gpucmp::tensor_types& e5m2 = gpucmp::types_of(numerics::fp8_e5m2);
  CHECK(e5m2.input == element_type::fp8_e5m2);
  CHECK(e5m2.weight == element_type::fp8_e4m3);
  CHECK(e5m2.output == element_type::bf16);
  CHECK(e5m2.scale == element_type::fp32);
  CHECK(gpucmp::tf32_products(numerics::tf32));
  CHECK_FALSE(gpucmp::tf32_products(numerics::fp32));
  CHECK(gpucmp::peak_precision(numerics::fp16_acc16) == gpucmp::precision::fp16);
  CHECK(gpucmp::activation_bytes(numerics::tf32) == 4);
  CHECK_THROWS_WITH(gpucmp::parse_numerics("fp4"), GPUCMP_CONTAINS("unknown precision 'fp4' (fp64, fp32, tf32, fp16"));
  CHECK_THROWS_AS(gpucmp::check_supported(numerics::fp8_e4m3, 8, 0), gpucmp::unsupported);
  CHECK_NOTHROW(gpucmp::check_supported(numerics::fp8_e4m3, 9, 0));
}

TEST_CASE("what an operation derives from its recipe follows each tensor's type", "[ops][numerics]") {
  // INT8 GEMM: 1-byte A and B, 4-byte C; exact.
  gpucmp::gemm_problem g;
  g.m = 64;
  g.n = 32;
  g.k = 16;
  g.dtype = numerics::int8;
  CHECK(g.min_bytes() == 64.0 * 16 + 16.0 * 32 + 64.0 * 32 * 4);
  CHECK(gpucmp::gemm_tolerance(numerics::int8).sigmas == 0);
  // FP16 accumulating in FP16 rounds its sums at FP16's unit; FP32-accumulating FP16 at FP32's.
  CHECK(gpucmp::gemm_tolerance(numerics::fp16_acc16).accumulate_eps == std::ldexp(1.0, -11));
  CHECK(gpucmp::gemm_tolerance(numerics::fp16).accumulate_eps == std::ldexp(1.0, -24));
  CHECK(gpucmp::gemm_tolerance(numerics::bf16).output_eps == std::ldexp(1.0, -8));
  // A convolution takes the four floating recipes and names what it does not take.
  gpucmp::conv_problem c;
  c.n = 1;
  c.c = c.k = 8;
  c.h = c.w = 4;
  c.r = c.s = 3;
  c.pad_h = c.pad_w = 1;
  for (numerics t : gpucmp::conv_numerics) {
    c.dtype = t;
    CHECK_NOTHROW(c.validate());
    CHECK(c.min_bytes(gpucmp::conv_direction::forward) ==
          double(gpucmp::activation_bytes(t)) * (c.x_elements() + c.w_elements() + c.y_elements()));
  }
  c.dtype = numerics::int8;
  CHECK_THROWS_AS(c.validate(), gpucmp::unsupported);
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("a convolution does not run int8 (it takes fp32, tf32, fp16, bf16)"));
  // Subnormal allowances come from the output type's grid.
  CHECK(gpucmp::conv_tolerance(numerics::fp16).output_abs == std::ldexp(1.0, -25));
  CHECK(gpucmp::conv_tolerance(numerics::bf16).output_abs == std::ldexp(1.0, -134));
  CHECK(gpucmp::conv_tolerance(numerics::fp32).output_abs == 0.0);
}
