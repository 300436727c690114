// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp's own command-line flags (--gpucmp_*), taken out of argv before Google Benchmark
// sees it. Host-only and free of Google Benchmark, so the parser can be tested and fuzzed
// on its own. resolve_options() is the one place where they meet the other settings.
#pragma once

#include <gpucmp/measure/options.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

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
  double target_noise = 0;  ///< --gpucmp_target_noise=X: the stopping rule's relative noise target (0.005: 0.5 %)
  std::size_t min_samples = 0;  ///< --gpucmp_min_samples=N: never stop with fewer samples
  double max_time_s = 0;    ///< --gpucmp_max_time_s=X: wall-time cap of each sampling loop
  int device = -1;          ///< --gpucmp_device=N: the CUDA device to run on (after CUDA_VISIBLE_DEVICES); -1: the current one
  std::string progress = "auto";  ///< --gpucmp_progress=on|off|auto: progress lines on stderr (auto: when it is a terminal)
  std::string error;        ///< the first bad flag, named, or "" when all were good
};

/// One --gpucmp_* flag as --help lists it.
struct gpucmp_flag_help {
  const char* flag;     ///< "--gpucmp_power", "--gpucmp_batch=N"
  const char* meaning;  ///< what it does, with its default
};

/// Every --gpucmp_* flag, for --help (a test checks each flag take_gpucmp_flags takes is here).
inline const std::vector<gpucmp_flag_help>& gpucmp_flags_help() {
  static const std::vector<gpucmp_flag_help> help = {
      {"--gpucmp_device=N", "run on CUDA device N (numbered after CUDA_VISIBLE_DEVICES); default: the current device, 0"},
      {"--gpucmp_power", "record power, energy, clocks and throttling for every benchmark (NVML); default off"},
      {"--gpucmp_batch=N", "time N launches per sample everywhere, 1 to 256; default: chosen from the warm-up"},
      {"--gpucmp_target_noise=X", "stop sampling once the relative noise is at most X (0.005 = 0.5 %); default 0.005"},
      {"--gpucmp_min_samples=N", "never stop sampling with fewer than N samples; default 10"},
      {"--gpucmp_max_time_s=X", "cap each sampling loop at X seconds of wall time; default 15"},
      {"--gpucmp_warmup_s=X", "warm up at least X seconds before sampling; default 0.02"},
      {"--gpucmp_window_s=X", "sample a fixed window of X seconds of GPU time, whatever the noise; default off"},
      {"--gpucmp_cooldown_s=X", "idle X seconds before each warm-up; default 0"},
      {"--gpucmp_timeout_s=X", "end a measurement still running after X seconds as a timeout and go on; default off"},
      {"--gpucmp_kernels_out=FILE", "write every kernel-mode breakdown to FILE as JSON"},
      {"--gpucmp_search_log=FILE", "write every algorithm search (run_verified) to FILE, one JSON line each"},
      {"--gpucmp_progress=WHEN", "progress lines for searches and model builds on stderr: on, off, or auto (when stderr is a terminal); default auto"},
  };
  return help;
}

/// The --help text of gpucmp's flags.
inline std::string gpucmp_flags_help_text() {
  std::string text = "gpucmp flags (before Google Benchmark's, which follow):\n";
  for (const gpucmp_flag_help& h : gpucmp_flags_help()) {
    std::string flag = h.flag;
    flag.resize(std::max<std::size_t>(flag.size(), 28), ' ');
    text += "  " + flag + "  " + h.meaning + "\n";
  }
  return text;
}

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
      {"--gpucmp_max_time_s=", &flags.max_time_s, "seconds of wall time a sampling loop may take", 86400},
      {"--gpucmp_target_noise=", &flags.target_noise, "a relative noise target (0.005 is 0.5 %)", 1},
  };
  // Whole-number flags: where the value goes, what it means, its range.
  struct count_flag {
    std::string prefix;
    std::size_t* value;
    const char* expected;
    std::size_t min, max;
  };
  std::size_t device = 0;
  const count_flag count_flags[] = {
      {"--gpucmp_min_samples=", &flags.min_samples, "a whole number of samples", 1, 1000000},
      {"--gpucmp_device=", &device, "a CUDA device number", 0, 1023},
  };
  auto take_count = [&](const std::string& arg) {
    for (const auto& f : count_flags) {
      if (arg.rfind(f.prefix, 0) != 0) continue;
      const std::string value = arg.substr(f.prefix.size());
      const bool digits = !value.empty() && value.size() <= 7 && value.find_first_not_of("0123456789") == std::string::npos;
      const unsigned long n = digits ? std::stoul(value) : 0;
      if (!digits || n < f.min || n > f.max) {
        if (flags.error.empty()) {
          flags.error = arg + ": expected " + f.expected + ", " + std::to_string(f.min) + " to " + std::to_string(f.max);
        }
      } else {
        *f.value = n;
        if (f.value == &device) flags.device = int(n);
      }
      return true;
    }
    return false;
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
    } else if (arg.rfind("--gpucmp_progress=", 0) == 0) {
      flags.progress = arg.substr(std::string("--gpucmp_progress=").size());
      if (flags.progress != "on" && flags.progress != "off" && flags.progress != "auto" && flags.error.empty()) {
        flags.error = arg + ": expected on, off or auto";
      }
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
    } else if (take_seconds(arg) || take_count(arg)) {
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
  if (flags.target_noise > 0) o.target_noise = flags.target_noise;
  if (flags.min_samples > 0) {
    o.min_samples = flags.min_samples;
    o.max_samples = std::max(o.max_samples, o.min_samples);
  }
  if (flags.max_time_s > 0) o.max_wall_time_s = flags.max_time_s;
  return o;
}

}  // namespace gpucmp::detail
