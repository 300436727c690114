// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The element types a tensor can hold, as one table: name, size, rounding unit, largest
// finite value and CUDA's type tag. Every operation, model and collective names its tensors'
// types from this list (ops/numerics.hpp puts them together per operation). Adding a type is
// one enum value and one table row; the static_assert below and every switch over the enum
// (none takes `default:`) fail the build until each user of the vocabulary handles it
// (docs/architecture.md, "Adding an element type").
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <library_types.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpucmp {

/// What one element of a tensor is, in memory.
enum class element_type {
  fp64,      ///< IEEE binary64
  fp32,      ///< IEEE binary32 (TF32 math reads it too: that is a property of the math, numerics.hpp)
  fp16,      ///< IEEE binary16
  bf16,      ///< bfloat16: FP32's exponent, 8 significant bits
  fp8_e4m3,  ///< OCP FP8 E4M3 (no infinities, largest 448)
  fp8_e5m2,  ///< OCP FP8 E5M2 (largest 57344)
  int8,      ///< signed 8-bit integer
  int32,     ///< signed 32-bit integer (what INT8 products accumulate into)
};

/// Number of element types.
inline constexpr std::size_t element_type_count = 8;

/// One row of the element-type table.
struct element_info {
  element_type type;        ///< the row's value (rows follow the enum's order)
  const char* name;         ///< as in benchmark names and command lines: "fp16", "fp8_e4m3", "int32"
  std::size_t bytes;        ///< size of one element
  bool floating;            ///< floating point (false: integer)
  int significand_bits;     ///< significant bits with the implicit one (0 for integers: exact)
  double largest;           ///< largest finite value
  double smallest_subnormal;  ///< the spacing of values next to zero (1 for integers)
  cudaDataType_t cuda;      ///< CUDA's tag (cuBLASLt, cuSPARSELt, cudaDataType_t APIs)
};

/// The table, in the enum's order.
inline constexpr element_info element_types[] = {
    {element_type::fp64, "fp64", 8, true, 53, 1.7976931348623157e308, 4.9406564584124654e-324, CUDA_R_64F},
    {element_type::fp32, "fp32", 4, true, 24, 3.4028234663852886e38, 1.401298464324817e-45, CUDA_R_32F},
    {element_type::fp16, "fp16", 2, true, 11, 65504.0, 5.9604644775390625e-08, CUDA_R_16F},
    {element_type::bf16, "bf16", 2, true, 8, 3.3895313892515355e38, 9.183549615799121e-41, CUDA_R_16BF},
    {element_type::fp8_e4m3, "fp8_e4m3", 1, true, 4, 448.0, 0.001953125, CUDA_R_8F_E4M3},
    {element_type::fp8_e5m2, "fp8_e5m2", 1, true, 3, 57344.0, 1.52587890625e-05, CUDA_R_8F_E5M2},
    {element_type::int8, "int8", 1, false, 0, 127.0, 1.0, CUDA_R_8I},
    {element_type::int32, "int32", 4, false, 0, 2147483647.0, 1.0, CUDA_R_32I},
};

namespace detail {
constexpr bool element_table_in_enum_order() {
  for (std::size_t i = 0; i < element_type_count; ++i) {
    if (static_cast<std::size_t>(element_types[i].type) != i) return false;
  }
  return true;
}
}  // namespace detail

static_assert(sizeof(element_types) / sizeof(element_types[0]) == element_type_count &&
                  static_cast<std::size_t>(element_type::int32) + 1 == element_type_count,
              "element_types needs one row per element_type value (and element_type_count must count them)");
static_assert(detail::element_table_in_enum_order(), "element_types' rows must follow the enum's order");

/// The table row of `t`.
constexpr const element_info& element_info_of(element_type t) noexcept { return element_types[static_cast<std::size_t>(t)]; }

/// "fp64", "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int32".
constexpr const char* to_string(element_type t) noexcept { return element_info_of(t).name; }

/// Bytes of one element.
constexpr std::size_t element_bytes(element_type t) noexcept { return element_info_of(t).bytes; }

/// The relative rounding error of one rounding to nearest into `t`: 2^-significand_bits
/// (half a unit in the last place); 0 for integers, whose sums are exact until they overflow.
inline double unit_roundoff(element_type t) noexcept {
  return element_info_of(t).floating ? std::ldexp(1.0, -element_info_of(t).significand_bits) : 0.0;
}

/// The element_type named `text`; throws invalid_argument naming the choices otherwise.
inline element_type parse_element_type(const std::string& text) {
  std::string names;
  for (const element_info& e : element_types) {
    if (text == e.name) return e.type;
    names += std::string(names.empty() ? "" : ", ") + e.name;
  }
  throw invalid_argument("unknown element type '" + text + "' (" + names + ")");
}

/// The C++ type that holds one element of `t`, for a visitor: visit_element calls
/// f(element_tag<T>{}). A tag rather than a T{} so types without constexpr construction work
/// alike.
template <class T>
struct element_tag {
  using type = T;  ///< the element's C++ type
};

/// Calls f(element_tag<T>{}) with the C++ type of `t`: double, float, __half, __nv_bfloat16,
/// __nv_fp8_e4m3, __nv_fp8_e5m2, std::int8_t, std::int32_t. Every f is instantiated for every
/// type; an operation that takes fewer types switches itself and names the others unsupported.
template <class F>
decltype(auto) visit_element(element_type t, F&& f) {
  switch (t) {
    case element_type::fp64: return f(element_tag<double>{});
    case element_type::fp32: return f(element_tag<float>{});
    case element_type::fp16: return f(element_tag<__half>{});
    case element_type::bf16: return f(element_tag<__nv_bfloat16>{});
    case element_type::fp8_e4m3: return f(element_tag<__nv_fp8_e4m3>{});
    case element_type::fp8_e5m2: return f(element_tag<__nv_fp8_e5m2>{});
    case element_type::int8: return f(element_tag<std::int8_t>{});
    case element_type::int32: return f(element_tag<std::int32_t>{});
  }
  throw invalid_argument("visit_element: element_type value " + std::to_string(static_cast<int>(t)) + " is not in the table");
}

/// Calls f(T{}) with the C++ type of an activation tensor: float, __half or __nv_bfloat16.
/// The convolution-family operations, models and training store these only (each one's
/// kernels are instantiated for these three); any other type throws unsupported.
template <class F>
decltype(auto) visit_floating_storage(element_type t, F&& f) {
  switch (t) {
    case element_type::fp32: return f(float{});
    case element_type::fp16: return f(__half{});
    case element_type::bf16: return f(__nv_bfloat16{});
    case element_type::fp64:
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2:
    case element_type::int8:
    case element_type::int32: break;
  }
  throw unsupported(std::string("tensors of ") + to_string(t) + " are not stored by this operation (fp32, fp16, bf16)");
}

}  // namespace gpucmp
