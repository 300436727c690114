// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The shapes of the GPU spec database: numeric precisions, confidence, one datasheet row, a
// device-name rule and an article erratum. Rows live in specs_data.hpp, logic in specs.hpp.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cstddef>
#include <limits>
#include <string>

namespace gpucmp {

/// Arithmetic a peak rate or an operation refers to (tensor-core rates for tf32..int8).
enum class precision {
  fp64,         ///< FP64 on the CUDA cores
  fp64_tensor,  ///< FP64 on the tensor cores
  fp32,         ///< FP32 on the CUDA cores (no tensor cores)
  tf32,         ///< TF32 tensor cores
  fp16,         ///< FP16 tensor cores, FP32 accumulate
  bf16,         ///< BF16 tensor cores, FP32 accumulate
  fp8,          ///< FP8 tensor cores
  int8,         ///< INT8 tensor cores (TOP/s)
  none,         ///< no arithmetic rate applies (memory-only work)
};

/// Number of precisions with a peak rate (all but none).
inline constexpr std::size_t precision_count = 8;

/// "fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "none".
inline const char* to_string(precision p) noexcept {
  switch (p) {
    case precision::fp64: return "fp64";
    case precision::fp64_tensor: return "fp64_tensor";
    case precision::fp32: return "fp32";
    case precision::tf32: return "tf32";
    case precision::fp16: return "fp16";
    case precision::bf16: return "bf16";
    case precision::fp8: return "fp8";
    case precision::int8: return "int8";
    case precision::none: return "none";
  }
  return "none";
}

/// The structure a workload's FLOPs exploit. Datasheets quote a second, "with sparsity" rate
/// for 2:4 structured sparsity (two of every four weights zero) on the tensor cores of
/// Ampere and later: twice the dense one. A 2:4 workload declares the dense FLOP count (what
/// the datasheets' sparse figures count too) and its % of peak is taken against that rate.
enum class sparsity {
  dense,           ///< every product computed
  structured_2_4,  ///< 2:4 structured sparsity on sparse tensor cores
};

/// "dense", "2:4".
inline const char* to_string(sparsity s) noexcept { return s == sparsity::structured_2_4 ? "2:4" : "dense"; }

/// Whether datasheets give a 2:4 sparse rate for `p` (the tensor-core rates but FP64's).
constexpr bool has_sparse_rate(precision p) noexcept {
  return p == precision::tf32 || p == precision::fp16 || p == precision::bf16 || p == precision::fp8 || p == precision::int8;
}

/// Parses a precision name; also accepts the dtype names used in benchmark names
/// ("fp8_e4m3", "fp8_e5m2", "fp16_acc16" map to their tensor rate). Returns none otherwise.
inline precision precision_from_name(const std::string& text) noexcept {
  for (std::size_t i = 0; i <= precision_count; ++i) {
    const auto p = static_cast<precision>(i);
    if (text == to_string(p)) return p;
  }
  if (text.rfind("fp8", 0) == 0) return precision::fp8;
  if (text.rfind("fp16", 0) == 0) return precision::fp16;
  if (text.rfind("bf16", 0) == 0) return precision::bf16;
  return precision::none;
}

/// How far a row's figures can be trusted.
enum class confidence {
  high,     ///< NVIDIA datasheet or documentation
  medium,   ///< partly from secondary sources
  low,      ///< no public NVIDIA datasheet (e.g. L20)
  derived,  ///< not in the database: computed from the device's own attributes
};

/// "high", "medium", "low", "derived".
inline const char* to_string(confidence c) noexcept {
  switch (c) {
    case confidence::high: return "high";
    case confidence::medium: return "medium";
    case confidence::low: return "low";
    case confidence::derived: return "derived";
  }
  return "unknown";
}

/// Marks a figure the database does not have.
inline constexpr double no_value = std::numeric_limits<double>::quiet_NaN();

/// One GPU's datasheet figures (static data; strings are literals). Tensor peaks are dense.
struct gpu_spec {
  const char* key;                       ///< stable identifier, e.g. "h200_sxm"
  const char* name;                      ///< marketing name
  const char* architecture;              ///< e.g. "Hopper (GH100)"
  int cc_major;                          ///< compute capability, major
  int cc_minor;                          ///< compute capability, minor
  double sm_count;                       ///< streaming multiprocessors
  double cuda_cores;                     ///< FP32 CUDA cores
  double tensor_cores;                   ///< tensor cores
  double boost_clock_mhz;                ///< boost clock
  double memory_gb;                      ///< memory as sold (decimal GB)
  const char* memory_type;               ///< HBM3e, GDDR6, ...
  double memory_bandwidth_gbs;           ///< datasheet bandwidth, 10^9 B/s
  double l2_mb;                          ///< L2 as the driver reports it (MiB)
  double peak_tflops[precision_count];   ///< dense peak per precision (indexed by precision), TFLOP/s or TOP/s
  double tdp_w;                          ///< board power
  double mig_instances;                  ///< maximum MIG instances (0 = no MIG)
  double nvlink_gbs;                     ///< total bidirectional NVLink bandwidth (0 = none)
  double pcie_gen;                       ///< PCIe generation
  const char* sources;                   ///< source keys (docs/gpu-database.md)
  confidence trust;                      ///< confidence class
  const char* confidence_note;           ///< the sheet's confidence text
};

/// A device-name rule: all non-empty tokens must appear in the normalised driver name.
struct name_rule {
  const char* key;        ///< gpu_spec key it selects
  const char* tokens[3];  ///< required tokens ("" = unused)
};

/// A figure a published comparison article got wrong.
struct article_erratum {
  const char* article;  ///< which article
  const char* gpu;      ///< gpu_spec key
  const char* field;    ///< what the figure is
  const char* claimed;  ///< what the article says
  const char* correct;  ///< the correct figure
  const char* verdict;  ///< wrong, incomplete, misleading, sparse-unlabelled
};

}  // namespace gpucmp
