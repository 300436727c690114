// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The numerics of an operation: the element type of each of its tensors (input, weight,
// output), of its accumulator and of its scales, and the datasheet rate its products run at.
// One named recipe per row of one table ("fp16": FP16 tensors, FP32 accumulate; "int8": INT8
// in, INT32 accumulate and out; "fp8_e4m3": E4M3 in with FP32 scales, BF16 out). GEMM,
// convolution, models and training name their numerics from this table, collectives their
// element type from cuda/element_type.hpp: one vocabulary. A new recipe is one enum value
// and one row; the static_asserts and every switch over the enum (none takes `default:`)
// fail the build until it is handled.
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/specs/specs_types.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace gpucmp {

/// The numerics an operation runs in, named as in benchmark names and command lines.
enum class numerics {
  fp64,        ///< FP64 tensors and accumulation
  fp32,        ///< FP32 on the CUDA cores (no tensor cores)
  tf32,        ///< FP32 tensors, TF32 tensor-core products, FP32 accumulate
  fp16,        ///< FP16 tensors, FP32 accumulate
  fp16_acc16,  ///< FP16 tensors, FP16 accumulate
  bf16,        ///< BF16 tensors, FP32 accumulate
  fp8_e4m3,    ///< E4M3 input and weight with FP32 per-tensor scales, FP32 accumulate, BF16 output
  fp8_e5m2,    ///< E5M2 input, E4M3 weight (cuBLASLt has no E5M2 x E5M2), FP32 scales and accumulate, BF16 output
  int8,        ///< INT8 input and weight, INT32 accumulate and output
};

/// Number of recipes.
inline constexpr std::size_t numerics_count = 9;

/// The element type of each tensor of an operation.
struct tensor_types {
  element_type input;       ///< A of a GEMM, x of a convolution (dy in backward data)
  element_type weight;      ///< B of a GEMM, w of a convolution
  element_type output;      ///< C and D of a GEMM, y of a convolution
  element_type accumulate;  ///< what the sums of products are held in
  std::optional<element_type> scale;  ///< per-tensor scale factors of input and weight (FP8); none when unscaled
};

/// One row of the recipe table.
struct numerics_info {
  numerics value;                  ///< the row's recipe (rows follow the enum's order)
  const char* name;                ///< "fp16", "fp16_acc16", "int8", ...
  tensor_types types;              ///< per tensor
  precision rate;                  ///< the datasheet rate its products run at (% of peak reads it)
  int minimum_compute_capability;  ///< major * 10 + minor of the first GPUs with that rate (0: any)
};

/// The recipes, in the enum's order.
inline constexpr numerics_info numerics_table[] = {
    {numerics::fp64, "fp64", {element_type::fp64, element_type::fp64, element_type::fp64, element_type::fp64, std::nullopt},
     precision::fp64_tensor, 0},
    {numerics::fp32, "fp32", {element_type::fp32, element_type::fp32, element_type::fp32, element_type::fp32, std::nullopt},
     precision::fp32, 0},
    {numerics::tf32, "tf32", {element_type::fp32, element_type::fp32, element_type::fp32, element_type::fp32, std::nullopt},
     precision::tf32, 80},
    {numerics::fp16, "fp16", {element_type::fp16, element_type::fp16, element_type::fp16, element_type::fp32, std::nullopt},
     precision::fp16, 70},
    {numerics::fp16_acc16, "fp16_acc16",
     {element_type::fp16, element_type::fp16, element_type::fp16, element_type::fp16, std::nullopt}, precision::fp16, 70},
    {numerics::bf16, "bf16", {element_type::bf16, element_type::bf16, element_type::bf16, element_type::fp32, std::nullopt},
     precision::bf16, 80},
    {numerics::fp8_e4m3, "fp8_e4m3",
     {element_type::fp8_e4m3, element_type::fp8_e4m3, element_type::bf16, element_type::fp32, element_type::fp32},
     precision::fp8, 89},
    {numerics::fp8_e5m2, "fp8_e5m2",
     {element_type::fp8_e5m2, element_type::fp8_e4m3, element_type::bf16, element_type::fp32, element_type::fp32},
     precision::fp8, 89},
    {numerics::int8, "int8", {element_type::int8, element_type::int8, element_type::int32, element_type::int32, std::nullopt},
     precision::int8, 75},
};

namespace detail {
constexpr bool numerics_table_in_enum_order() {
  for (std::size_t i = 0; i < numerics_count; ++i) {
    if (static_cast<std::size_t>(numerics_table[i].value) != i) return false;
  }
  return true;
}
}  // namespace detail

static_assert(sizeof(numerics_table) / sizeof(numerics_table[0]) == numerics_count &&
                  static_cast<std::size_t>(numerics::int8) + 1 == numerics_count,
              "numerics_table needs one row per numerics value (and numerics_count must count them)");
static_assert(detail::numerics_table_in_enum_order(), "numerics_table's rows must follow the enum's order");

/// The table row of `t`.
constexpr const numerics_info& numerics_info_of(numerics t) noexcept { return numerics_table[static_cast<std::size_t>(t)]; }

/// "fp64", "fp32", "tf32", "fp16", "fp16_acc16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8".
constexpr const char* to_string(numerics t) noexcept { return numerics_info_of(t).name; }

/// The element type of each tensor of `t`.
constexpr const tensor_types& types_of(numerics t) noexcept { return numerics_info_of(t).types; }

/// Bytes of one stored activation under `t` (its output type's): models and training keep
/// every activation and gradient tensor in it.
constexpr std::size_t activation_bytes(numerics t) noexcept { return element_bytes(numerics_info_of(t).types.output); }

/// The datasheet rate `t`'s products run at (for % of peak).
constexpr precision peak_precision(numerics t) noexcept { return numerics_info_of(t).rate; }

/// Whether `t`'s products run on TF32 tensor cores (FP32 tensors whose inputs the tensor cores
/// round to 10 mantissa bits).
constexpr bool tf32_products(numerics t) noexcept { return numerics_info_of(t).rate == precision::tf32; }

/// Lowest compute capability (major * 10 + minor) with tensor-core support for `t` (0: runs
/// anywhere CUDA does).
constexpr int minimum_compute_capability(numerics t) noexcept { return numerics_info_of(t).minimum_compute_capability; }

/// Throws unsupported ("fp8_e4m3 needs sm_89+, this GPU is sm_80") when a GPU of compute
/// capability major.minor cannot run `t`.
inline void check_supported(numerics t, int cc_major, int cc_minor) {
  const int needed = minimum_compute_capability(t);
  const int have = cc_major * 10 + cc_minor;
  if (have < needed) {
    throw unsupported(std::string(to_string(t)) + " needs sm_" + std::to_string(needed) + "+, this GPU is sm_" +
                      std::to_string(have));
  }
}

/// The recipe named `text`; throws invalid_argument naming the choices otherwise.
inline numerics parse_numerics(const std::string& text) {
  std::string names;
  for (const numerics_info& n : numerics_table) {
    if (text == n.name) return n.value;
    names += std::string(names.empty() ? "" : ", ") + n.name;
  }
  throw invalid_argument("unknown precision '" + text + "' (" + names + ")");
}

/// Throws unsupported naming `operation` and the recipes it takes when `t` is not one of
/// `taken` (a convolution takes fp32, tf32, fp16 and bf16 today).
template <std::size_t N>
void require_numerics(numerics t, const numerics (&taken)[N], const std::string& operation) {
  std::string names;
  for (numerics n : taken) {
    if (n == t) return;
    names += std::string(names.empty() ? "" : ", ") + to_string(n);
  }
  throw unsupported(operation + " does not run " + to_string(t) + " (it takes " + names + ")");
}

}  // namespace gpucmp
