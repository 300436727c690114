// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// GPU spec lookups: by key, by the driver's device name, by compute capability and memory
// size, and — for a GPU the database does not know — figures derived from the device's own
// attributes, marked as derived. Host-only; the rows are in specs_data.hpp.
#pragma once

#include <gpucmp/specs/specs_data.hpp>
#include <gpucmp/specs/specs_types.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpucmp {

/// How a GPU was matched to its figures.
enum class spec_match {
  by_key,                   ///< asked for by database key
  by_name,                  ///< the driver's device name matched a name rule
  by_compute_capability,    ///< no name rule matched; nearest row of the same compute capability and memory size
  derived,                  ///< not in the database: figures computed from device attributes
};

/// "key", "name", "compute capability + memory", "derived".
inline const char* to_string(spec_match m) noexcept {
  switch (m) {
    case spec_match::by_key: return "key";
    case spec_match::by_name: return "name";
    case spec_match::by_compute_capability: return "compute capability + memory";
    case spec_match::derived: return "derived";
  }
  return "unknown";
}

/// A GPU's figures as a comparison uses them, with how they were found. Copyable value.
struct gpu_profile {
  std::string key;            ///< database key, or "derived:<device name>"
  std::string name;           ///< marketing name (or the device's own name when derived)
  std::string architecture;   ///< architecture
  int cc_major = 0;           ///< compute capability, major
  int cc_minor = 0;           ///< compute capability, minor
  double sm_count = no_value;              ///< SMs
  double memory_gb = no_value;             ///< memory (decimal GB)
  std::string memory_type;                 ///< HBM3e, GDDR6, ... ("" when derived)
  /// Device memory CUDA reports (cudaMemGetInfo's total): the device's own figure when
  /// derived, else estimated from the datasheet (visible_memory_estimate).
  double visible_memory_bytes = no_value;
  double memory_bandwidth_gbs = no_value;  ///< bandwidth, 10^9 B/s
  double l2_mb = no_value;                 ///< L2 (MiB)
  double peak_tflops[precision_count] = {no_value, no_value, no_value, no_value,
                                         no_value, no_value, no_value, no_value};  ///< dense peaks
  double tdp_w = no_value;                 ///< board power
  std::string sources;                     ///< source keys
  confidence trust = confidence::high;     ///< confidence class
  spec_match matched = spec_match::by_key; ///< how it was found

  /// Dense peak rate for `p` in FLOP/s (or OP/s); NaN when the GPU has none.
  double peak_per_s(precision p) const noexcept {
    return p == precision::none ? no_value : peak_tflops[static_cast<std::size_t>(p)] * 1e12;
  }
  /// Whether the GPU has a published peak for `p`.
  bool supports(precision p) const noexcept { return std::isfinite(peak_per_s(p)); }
  /// Peak rate for `p` with structure `s`: 2:4 sparsity doubles the tensor-core rates of
  /// compute capability 8.0 and later (their sparse tensor cores); NaN where there is no such rate.
  double peak_per_s(precision p, sparsity s) const noexcept {
    if (s == sparsity::dense) return peak_per_s(p);
    return has_sparse_rate(p) && cc_major >= 8 ? 2 * peak_per_s(p) : no_value;
  }
  /// Whether the GPU has a published peak for `p` with structure `s`.
  bool supports(precision p, sparsity s) const noexcept { return std::isfinite(peak_per_s(p, s)); }
  /// Bandwidth in bytes per second.
  double bandwidth_bytes_per_s() const noexcept { return memory_bandwidth_gbs * 1e9; }
};

/// The memory CUDA reports on a GPU sold with `memory_gb` of `memory_type`: the figure read
/// as GiB on HBM (an H200 sold as 141 GB reported 139.8 GiB on our machine:
/// results/h200/suite.json's gpu_memory_bytes), 15/16 of it on GDDR, whose ECC is stored
/// inline and is on by default on datacenter boards (no GDDR board was measured here). An
/// estimate; a capacity check subtracts its own reserve on top.
inline double visible_memory_estimate(double memory_gb, const std::string& memory_type) noexcept {
  const bool inline_ecc = memory_type.rfind("GDDR", 0) == 0;
  return memory_gb * 1073741824.0 * (inline_ecc ? 15.0 / 16.0 : 1.0);
}

namespace detail {

inline gpu_profile profile_of(const gpu_spec& s, spec_match matched) {
  gpu_profile p;
  p.key = s.key;
  p.name = s.name;
  p.architecture = s.architecture;
  p.cc_major = s.cc_major;
  p.cc_minor = s.cc_minor;
  p.sm_count = s.sm_count;
  p.memory_gb = s.memory_gb;
  p.memory_type = s.memory_type;
  p.visible_memory_bytes = visible_memory_estimate(s.memory_gb, s.memory_type);
  p.memory_bandwidth_gbs = s.memory_bandwidth_gbs;
  p.l2_mb = s.l2_mb;
  std::copy(std::begin(s.peak_tflops), std::end(s.peak_tflops), std::begin(p.peak_tflops));
  p.tdp_w = s.tdp_w;
  p.sources = s.sources;
  p.trust = s.trust;
  p.matched = matched;
  return p;
}

inline std::vector<std::string> name_tokens(const std::string& device_name) {
  std::vector<std::string> tokens;
  std::string current;
  for (char ch : device_name) {
    if (ch == ' ' || ch == '-' || ch == '_' || ch == '(' || ch == ')' || ch == ',') {
      if (!current.empty()) tokens.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
  }
  if (!current.empty()) tokens.push_back(current);
  return tokens;
}

// FP32 lanes per SM by compute capability, for GPUs the database does not know.
inline double fp32_lanes_per_sm(int cc_major, int cc_minor) noexcept {
  if (cc_major == 8 && cc_minor == 0) return 64;  // GA100
  if (cc_major == 7) return 64;                    // Volta, Turing
  if (cc_major >= 8) return 128;                   // GA10x, Ada, Hopper, Blackwell
  return no_value;
}

}  // namespace detail

/// Every row of the database.
inline std::vector<gpu_profile> all_gpu_specs() {
  std::vector<gpu_profile> out;
  for (const auto& s : specs_data::gpus) out.push_back(detail::profile_of(s, spec_match::by_key));
  return out;
}

/// The row with database key `key`, if any.
inline std::optional<gpu_profile> find_spec_by_key(const std::string& key) {
  for (const auto& s : specs_data::gpus) {
    if (key == s.key) return detail::profile_of(s, spec_match::by_key);
  }
  return std::nullopt;
}

/// The row whose name rule matches the driver's device name (e.g. "NVIDIA H100 80GB HBM3").
inline std::optional<gpu_profile> find_spec_by_device_name(const std::string& device_name) {
  const auto tokens = detail::name_tokens(device_name);
  for (const auto& rule : specs_data::name_rules) {
    bool all = true;
    for (const char* t : rule.tokens) {
      if (*t != '\0' && std::find(tokens.begin(), tokens.end(), t) == tokens.end()) all = false;
    }
    if (all) {
      auto found = find_spec_by_key(rule.key);
      if (found) found->matched = spec_match::by_name;
      return found;
    }
  }
  return std::nullopt;
}

/// The row of the same compute capability whose memory is nearest `memory_bytes`, within 15 %;
/// of rows equally near (PCIe and SXM variants), the first in data/gpus.csv.
inline std::optional<gpu_profile> find_spec_by_compute_capability(int cc_major, int cc_minor, double memory_bytes) {
  const gpu_spec* best = nullptr;
  double best_error = 0.15;
  for (const auto& s : specs_data::gpus) {
    if (s.cc_major != cc_major || s.cc_minor != cc_minor) continue;
    const double error = std::fabs(memory_bytes / (s.memory_gb * 1e9) - 1.0);
    // The driver reports GiB-ish totals a few percent under the marketed GB.
    if (best == nullptr ? error <= best_error : error < best_error) {
      best_error = error;
      best = &s;
    }
  }
  if (best == nullptr) return std::nullopt;
  return detail::profile_of(*best, spec_match::by_compute_capability);
}

/// Facts of a device as the runtime reports them, for lookups without a CUDA dependency.
struct device_facts {
  std::string name;                ///< driver's device name
  int cc_major = 0;                ///< compute capability, major
  int cc_minor = 0;                ///< compute capability, minor
  double memory_bytes = 0;         ///< total memory
  double sm_count = 0;             ///< SMs
  double sm_clock_max_hz = 0;      ///< peak SM clock
  double memory_bandwidth_bytes_per_s = 0;  ///< 2 x memory clock x bus width
  double l2_bytes = 0;             ///< L2 size
};

/// The figures for a device: by name, else by compute capability and memory, else derived
/// from its attributes (FP32 peak = SMs x FP32 lanes x 2 x clock; bandwidth from memory clock
/// and bus width; no tensor peaks), marked confidence::derived.
inline gpu_profile spec_for_device(const device_facts& d) {
  if (auto by_name = find_spec_by_device_name(d.name)) return *by_name;
  if (auto by_cc = find_spec_by_compute_capability(d.cc_major, d.cc_minor, d.memory_bytes)) return *by_cc;
  gpu_profile p;
  p.key = "derived:" + d.name;
  p.name = d.name;
  p.architecture = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
  p.cc_major = d.cc_major;
  p.cc_minor = d.cc_minor;
  p.sm_count = d.sm_count;
  p.memory_gb = d.memory_bytes / 1e9;
  p.visible_memory_bytes = d.memory_bytes;
  p.memory_bandwidth_gbs = d.memory_bandwidth_bytes_per_s / 1e9;
  p.l2_mb = d.l2_bytes / (1024.0 * 1024.0);
  p.peak_tflops[static_cast<std::size_t>(precision::fp32)] =
      d.sm_count * detail::fp32_lanes_per_sm(d.cc_major, d.cc_minor) * 2.0 * d.sm_clock_max_hz * 1e-12;
  p.sources = "device attributes";
  p.trust = confidence::derived;
  p.matched = spec_match::derived;
  return p;
}

/// The published errata of the comparison articles for GPU `key` (all when empty).
inline std::vector<article_erratum> errata_for(const std::string& key = "") {
  std::vector<article_erratum> out;
  for (const auto& e : specs_data::errata) {
    if (key.empty() || key == e.gpu) out.push_back(e);
  }
  return out;
}

}  // namespace gpucmp
