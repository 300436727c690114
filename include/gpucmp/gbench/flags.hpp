// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp's own command-line flags (--gpucmp_*), taken out of argv before Google Benchmark
// sees it. Host-only and free of Google Benchmark, so the parser can be tested and fuzzed
// on its own. resolve_options() is the one place where they meet the other settings.
#pragma once

#include <gpucmp/measure/options.hpp>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>

namespace gpucmp::detail {

/// gpucmp's own command-line flags. Each applies to every benchmark of the process; 0
/// (false, "") leaves the benchmark's own setting.
struct gpucmp_flags {
  std::string kernels_out;  ///< --gpucmp_kernels_out=FILE: every kernel-mode breakdown, as JSON
  std::string search_log;   ///< --gpucmp_search_log=FILE: every search run_verified ran, one JSON line each
  bool power = false;       ///< --gpucmp_power: record power and energy
  /// --gpucmp_batch=N: every sample times N launches. A peer comparison sets it to the peer's
  /// calls per event pair, so both sides average over the same number of back-to-back launches.
  std::size_t batch = 0;
  /// --gpucmp_cooldown_s=X: idle X seconds before each warm-up (measure_options::cooldown_s).
  double cooldown_s = 0;
  /// --gpucmp_warmup_s=X and --gpucmp_window_s=X: warm up at least X seconds
  /// (measure_options::warmup_time_s) and sample a fixed window of X seconds of GPU time
  /// (measure_options::window_s), so a peer timed the same way times the same stretch of a
  /// GPU whose clocks drift under load.
  double warmup_s = 0;
  double window_s = 0;      ///< see warmup_s
  /// --gpucmp_timeout_s=X: a measurement still running after X seconds ends as a typed
  /// timeout (measure_options::timeout_s) and the run goes on with the next benchmark.
  double timeout_s = 0;
  std::string error;        ///< the first bad flag, named, or "" when all were good
};

/// Removes the --gpucmp_* flags from argv (keeping argv[0] and every other argument in
/// order) and returns them; a malformed value is reported in `error`, never thrown.
inline gpucmp_flags take_gpucmp_flags(int& argc, char** argv) {
  gpucmp_flags flags;
  const std::string kernels_out_flag = "--gpucmp_kernels_out=", search_log_flag = "--gpucmp_search_log=",
                    batch_flag = "--gpucmp_batch=";
  // The flags that take seconds: where the value goes, what it means and its largest value.
  struct seconds_flag {
    std::string prefix;
    double* value;
    const char* expected;
    double max_s;
  };
  const seconds_flag seconds_flags[] = {
      {"--gpucmp_cooldown_s=", &flags.cooldown_s, "idle seconds before each warm-up", 600},
      {"--gpucmp_warmup_s=", &flags.warmup_s, "seconds of warm-up", 600},
      {"--gpucmp_window_s=", &flags.window_s, "seconds of GPU time in each sampling window", 600},
      {"--gpucmp_timeout_s=", &flags.timeout_s, "seconds a measurement may run before it ends as a timeout", 86400},
  };
  auto take_seconds = [&](const std::string& arg) {
    for (const auto& f : seconds_flags) {
      if (arg.rfind(f.prefix, 0) != 0) continue;
      const std::string value = arg.substr(f.prefix.size());
      char* end = nullptr;
      // Plain decimal only: strtod would also take "inf", "nan" and hexadecimal.
      const bool decimal = !value.empty() && value.find_first_not_of("0123456789.eE+-") == std::string::npos;
      const double seconds = decimal ? std::strtod(value.c_str(), &end) : -1.0;
      if (end == nullptr || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > f.max_s) {
        if (flags.error.empty()) {
          flags.error = arg + ": expected " + f.expected + ", 0 to " + std::to_string(static_cast<long>(f.max_s));
        }
      } else {
        *f.value = seconds;
      }
      return true;
    }
    return false;
  };
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i] != nullptr ? argv[i] : "";
    if (arg.rfind(kernels_out_flag, 0) == 0) {
      flags.kernels_out = arg.substr(kernels_out_flag.size());
      if (flags.kernels_out.empty() && flags.error.empty()) flags.error = arg + ": expected a file name";
    } else if (arg.rfind(search_log_flag, 0) == 0) {
      flags.search_log = arg.substr(search_log_flag.size());
      if (flags.search_log.empty() && flags.error.empty()) flags.error = arg + ": expected a file name";
    } else if (arg == "--gpucmp_power") {
      flags.power = true;
    } else if (arg.rfind(batch_flag, 0) == 0) {
      const std::string value = arg.substr(batch_flag.size());
      const bool digits = !value.empty() && value.size() <= 6 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
      const unsigned long launches = digits ? std::stoul(value) : 0;
      if (launches < 1 || launches > measure_options{}.max_batch) {
        if (flags.error.empty()) {
          flags.error = arg + ": expected a whole number of launches per sample, 1 to " +
                        std::to_string(measure_options{}.max_batch) + " (the launch queue is finite)";
        }
      } else {
        flags.batch = launches;
      }
    } else if (take_seconds(arg)) {
      // taken (or named in flags.error)
    } else if (arg.rfind("--gpucmp_", 0) == 0) {
      // A misspelt gpucmp flag must not reach Google Benchmark, which would only call it unrecognized.
      if (flags.error.empty()) flags.error = arg + ": unknown gpucmp flag";
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return flags;
}

/// The options a benchmark body starts from, in the adapter's one order of precedence:
/// measure_options' defaults, then the group's (benchmark_group::Options, NoHold), then each
/// --gpucmp_* flag given on the command line; the body runs last and may still change them
/// through gpucmp::state::options(). The NVTX name is the benchmark's unless the group set one.
inline measure_options resolve_options(measure_options group_defaults, const gpucmp_flags& flags,
                                       const std::string& benchmark_name) {
  measure_options o = std::move(group_defaults);
  if (o.name.empty()) o.name = benchmark_name;
  if (flags.power) o.power = true;
  if (flags.batch > 0) o.batch = flags.batch;
  if (flags.cooldown_s > 0) o.cooldown_s = flags.cooldown_s;
  if (flags.warmup_s > 0) o.warmup_time_s = flags.warmup_s;
  if (flags.window_s > 0) o.window_s = flags.window_s;
  if (flags.timeout_s > 0) o.timeout_s = flags.timeout_s;
  return o;
}

}  // namespace gpucmp::detail
