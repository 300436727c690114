// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What one benchmark process shares across its registrations: the exit status and the tally
// of failures behind it, the flags, one engine per device, the device's spec row, and the
// check for a CUDA context lost to a sticky error.
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/specs/device_specs.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// Exit statuses of gpucmp::benchmark_main (and GPUCMP_BENCHMARK_MAIN).
enum exit_status : int {
  exit_ok = 0,            ///< every benchmark ran (or was skipped by its own choice)
  exit_failures = 1,      ///< at least one benchmark failed, or the command line was bad
  exit_no_device = 77,    ///< no CUDA device: every GPU benchmark was skipped (77 = "skipped" for CTest/automake)
};

namespace detail {

/// What happened during this process's benchmark runs, for the exit status.
struct run_tally {
  int failed = 0;           ///< benchmarks that ended in SkipWithError for a failure
  bool no_device = false;   ///< a benchmark found no CUDA device
  std::vector<std::string> failed_names;  ///< the failed benchmarks with their messages, for the closing summary
  /// The benchmark after whose error the CUDA context was unusable (a sticky error such as a
  /// trap or an illegal address), or "": every later benchmark is skipped without the GPU.
  std::string context_lost_in;
};

inline run_tally& tally() {
  static run_tally t;
  return t;
}

/// Kernel-mode breakdowns of this process's runs, in run order, for --gpucmp_kernels_out.
struct named_breakdown {
  std::string benchmark;            ///< registration name, "<function>/kernel"
  std::vector<kernel_stat> kernels; ///< its breakdown
};
inline std::vector<named_breakdown>& kernel_breakdowns() {
  static std::vector<named_breakdown> list;
  return list;
}

/// The flags this process runs with (benchmark_main stores them; every state applies them).
inline gpucmp_flags& flags_everywhere() {
  static gpucmp_flags flags;
  return flags;
}

/// The no-device reason, looked up once per process ("" when a device exists).
inline const std::string& cached_no_device_reason() {
  static const std::string reason = no_device_reason();
  return reason;
}

/// The engine the adapter measures with: the process's engine of the current device
/// (measure/shared_engine.hpp), which operations' searches share.
inline engine& engine_for_current_device() { return shared_engine(); }

/// The datasheet figures of a device, looked up once per device.
inline const gpu_profile& spec_of(const device_info& d) {
  static std::map<int, gpu_profile> specs;
  auto it = specs.find(d.ordinal);
  if (it == specs.end()) it = specs.emplace(d.ordinal, spec_for_device(d)).first;
  return it->second;
}

/// True when the CUDA context is unusable after a sticky error (a trap, an illegal address):
/// then even a query that touches no stream, such as cudaMemGetInfo, fails.
inline bool cuda_context_lost() noexcept {
  std::size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t state = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaGetLastError();
  return state != cudaSuccess && state != cudaErrorNoDevice && state != cudaErrorInsufficientDriver;
}

inline void report_failure(benchmark::State& gb, const std::string& name, const std::string& message) {
  ++tally().failed;
  tally().failed_names.push_back(name + ": " + message);
  if (tally().context_lost_in.empty() && cuda_context_lost()) tally().context_lost_in = name;
  gb.SkipWithError(message.c_str());
}

}  // namespace detail

}  // namespace gpucmp
