// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The device's and library's facts in Google Benchmark's JSON "context".
#pragma once

#include <gpucmp/cuda/binary_code.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/power/nvml.hpp>
#include <gpucmp/specs/device_specs.hpp>
#include <gpucmp/version.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <string>

namespace gpucmp {

/// Records the device's and library's facts in the JSON "context" (once per process; a
/// no-op without a device). GPUCMP_BENCHMARK_MAIN calls it; call it yourself in a custom main,
/// with GPUCMP_CUDA_ARCH_LIST from a CUDA file of your program: "cuda_architectures" then says
/// what GPU code the program carries, "gpu_code" how this GPU runs it, and a warning on
/// standard error says when that is JIT-compiled PTX.
inline void add_context(const char* cuda_arch_list = nullptr) {
  static bool added = false;
  if (added) return;
  added = true;
  benchmark::AddCustomContext("gpucmp_version", version_string);
  const std::string archs = cuda_arch_list != nullptr ? cuda_arch_list : "";
  benchmark::AddCustomContext("cuda_architectures", archs.empty() ? "unknown (main not compiled by nvcc)" : archs);
  if (!detail::cached_no_device_reason().empty()) {
    benchmark::AddCustomContext("gpu", detail::cached_no_device_reason());
    return;
  }
  try {
    const device_info d = query_current_device();
    auto num = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", v);
      return std::string(buf);
    };
    benchmark::AddCustomContext("gpu_device", std::to_string(d.ordinal));  // --gpucmp_device, after CUDA_VISIBLE_DEVICES
    benchmark::AddCustomContext("gpu_name", d.name);
    benchmark::AddCustomContext("gpu_uuid", d.uuid);
    benchmark::AddCustomContext("gpu_pci_bus_id", d.pci_bus_id);
    benchmark::AddCustomContext("gpu_compute_capability", d.compute_capability());
    benchmark::AddCustomContext("gpu_sm_count", std::to_string(d.sm_count));
    benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(d.l2_bytes));
    benchmark::AddCustomContext("gpu_memory_bytes", std::to_string(d.global_memory_bytes));
    benchmark::AddCustomContext("gpu_memory_bus_width_bits", std::to_string(d.memory_bus_width_bits));
    benchmark::AddCustomContext("gpu_sm_clock_max_mhz", num(d.sm_clock_max_hz * 1e-6));
    benchmark::AddCustomContext("gpu_memory_clock_max_mhz", num(d.memory_clock_max_hz * 1e-6));
    benchmark::AddCustomContext("gpu_ecc", d.ecc_enabled ? "on" : "off");
    benchmark::AddCustomContext("cuda_driver", cuda_version_string(d.driver_version));
    benchmark::AddCustomContext("cuda_runtime", cuda_version_string(d.runtime_version));
    const gpu_profile& spec = detail::spec_of(d);
    benchmark::AddCustomContext("gpu_spec", spec.key);
    benchmark::AddCustomContext("gpu_spec_match", to_string(spec.matched));
    benchmark::AddCustomContext("gpu_spec_confidence", to_string(spec.trust));
    const gpu_code code = gpu_code_for(archs, d.cc_major, d.cc_minor);
    benchmark::AddCustomContext("gpu_code", to_string(code));
    if (code == gpu_code::ptx_jit || code == gpu_code::none) {
      std::fprintf(stderr,
                   "gpucmp: WARNING: this program carries GPU code for %s only; the %s (compute capability %s) %s. "
                   "Build with CMAKE_CUDA_ARCHITECTURES=%d%d (or native) to time code built for it.\n",
                   archs.c_str(), d.name.c_str(), d.compute_capability().c_str(),
                   code == gpu_code::ptx_jit ? "runs its kernels as PTX JIT-compiled at load, not code built for it"
                                             : "can run none of it",
                   d.cc_major, d.cc_minor);
    }
    for (const auto& [key, value] : nvml_context(d)) benchmark::AddCustomContext(key, value);
  } catch (const std::exception& e) {
    benchmark::AddCustomContext("gpu", std::string("device query failed: ") + e.what());
  }
}

}  // namespace gpucmp
