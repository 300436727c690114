// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The plain record a measurement produces. Reporters only read it; a new metric is a new
// field here, never a change in the engine's loops.
#pragma once

#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/power/power_monitor.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/measure/stopping.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpucmp {

/// Outcome of a measurement: measured, or a typed reason why not.
enum class result_status {
  ok,             ///< measured
  failed,         ///< an error (CUDA, verification, hold timeout, ...): see message
  unsupported,    ///< cannot run on this GPU or build: see message
  out_of_memory,  ///< did not fit in device memory: message says needed vs free
  skipped,        ///< not run (e.g. no CUDA device): see message
  timeout,        ///< ran past measure_options::timeout_s: message says where
};

/// "ok", "failed", "unsupported", "oom", "skipped", "timeout".
inline const char* to_string(result_status s) noexcept {
  switch (s) {
    case result_status::ok: return "ok";
    case result_status::failed: return "failed";
    case result_status::unsupported: return "unsupported";
    case result_status::out_of_memory: return "oom";
    case result_status::skipped: return "skipped";
    case result_status::timeout: return "timeout";
  }
  return "unknown";
}

/// One measurement of one callable in one mode. Times are seconds per launch of the callable.
struct measurement {
  mode timing_mode = mode::hot;            ///< how the samples were taken
  result_status status = result_status::ok;  ///< whether it was measured
  std::string message;                     ///< why not, when status != ok

  std::vector<double> gpu_s;   ///< per sample: GPU seconds per launch (events; kernel mode: summed activity durations)
  std::vector<double> wall_s;  ///< per sample: host wall seconds per launch (enqueue + wait), for launch-bound code
  summary gpu;                 ///< summary of gpu_s
  summary wall;                ///< summary of wall_s

  std::size_t batch = 1;              ///< launches per sample
  std::size_t launches = 0;           ///< timed launches in total
  std::size_t warmup_launches = 0;    ///< untimed warm-up launches
  double warmup_wall_s = 0;           ///< wall time spent warming up
  double cooldown_s = 0;              ///< idle wall time before the warm-up (measure_options::cooldown_s)
  double settle_s = 0;                ///< wall time of back-to-back load before sampling (measure_options::settle_s)
  double power_settle_s = 0;          ///< wall time of back-to-back load before the power window (measure_options::power_settle_s)
  double window_s = 0;                ///< fixed sampling window of GPU time (measure_options::window_s); 0: noise rule
  double sampling_wall_s = 0;         ///< wall time of the sampling loop
  stop_reason stopped_by = stop_reason::converged;  ///< why sampling stopped
  bool noise_target_met = false;      ///< relative noise at or below the target
  double target_noise = 0;            ///< the target it was held to
  bool stream_held = false;           ///< launches were queued behind a held stream
  std::size_t l2_flush_bytes = 0;     ///< bytes written to flush L2 before each sample (cold mode)
  std::vector<std::string> warnings;  ///< things a reader must know next to the number
  std::optional<kernel_profile> kernels;  ///< kernel mode only: span, gaps and breakdown by kernel
  std::optional<power_record> power;      ///< with measure_options::power: power, energy, clocks, throttling

  /// True when status is ok.
  bool ok() const noexcept { return status == result_status::ok; }
};

}  // namespace gpucmp
