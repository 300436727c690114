// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What to measure and when to stop: the timing mode and the measurement options, with
// validation that names the offending field.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <cstddef>
#include <string>

namespace gpucmp {

/// How samples are taken. Every mode times with CUDA events on the measurement stream.
enum class mode {
  cold,   ///< L2 flushed before every sample; one launch per sample
  hot,    ///< batches of launches queued behind a held stream, released together
  graph,  ///< a batch of launches captured once into a CUDA graph; replays are timed
  kernel, ///< per-kernel GPU timestamps (CUPTI): the callable's own busy time, span and gaps
};

/// Name of a mode as it appears in benchmark names and reports: "cold", "hot", "graph", "kernel".
inline const char* to_string(mode m) noexcept {
  switch (m) {
    case mode::cold: return "cold";
    case mode::hot: return "hot";
    case mode::graph: return "graph";
    case mode::kernel: return "kernel";
  }
  return "unknown";
}

/// Parses "cold", "hot", "graph" or "kernel"; throws invalid_argument naming the text otherwise.
inline mode parse_mode(const std::string& text) {
  if (text == "cold") return mode::cold;
  if (text == "hot") return mode::hot;
  if (text == "graph") return mode::graph;
  if (text == "kernel") return mode::kernel;
  throw invalid_argument("unknown mode '" + text + "' (expected cold, hot, graph or kernel)");
}

/// Knobs of one measurement. Defaults suit kernels from about 1 us to 100 ms.
struct measure_options {
  // Warm-up: at least this many launches, and at least this long (whichever takes longer).
  std::size_t warmup_launches = 3;  ///< minimum warm-up launches (never behind a held stream)
  double warmup_time_s = 0.02;      ///< minimum warm-up wall time
  /// Idle wall time before the warm-up (once the device has finished its queued work), so a
  /// measurement does not inherit the power state of what ran before it, e.g. a multi-second
  /// algorithm search at full load on a power-capped GPU. Give a peer the same idle when
  /// comparing with it. 0: none.
  double cooldown_s = 0;

  // Stopping rule: stop once min_samples and min_gpu_time_s are reached and the relative
  // noise is at most target_noise, or the noise has stopped changing, or a cap is hit.
  std::size_t min_samples = 10;      ///< never stop with fewer samples (unless the wall cap hits)
  std::size_t max_samples = 100000;  ///< hard cap on samples
  double min_gpu_time_s = 0.1;       ///< minimum total GPU time measured
  double target_noise = 0.005;       ///< target relative noise (stddev / mean), 0.5 %
  double max_wall_time_s = 15.0;     ///< wall-clock cap for the sampling loop
  /// A fixed sampling window instead of the noise rule: stop at the first sample by which
  /// min_samples are taken and this much GPU time is measured, whatever the noise. Under a
  /// power cap a long GEMM slows for seconds after the load begins (the power limiter pulls
  /// the clocks down), so two harnesses compared on such a GPU must time the same stretch of it: the
  /// same warm-up time and the same window. 0: the noise rule.
  double window_s = 0;

  /// Time budget of the whole measurement (cool-down, warm-up, capture and sampling), wall
  /// seconds: past it the measurement ends as a typed timeout with the samples taken so
  /// far, even while a launch is still running on the GPU. 0: no budget.
  double timeout_s = 0;

  /// Name shown on the NVTX range around the measurement (the adapter uses the benchmark's name).
  std::string name;

  // Batching (hot, graph and kernel modes): each sample times `batch` launches, chosen from the
  // warm-up so that a sample lasts at least min_sample_time_s, at most max_batch launches.
  double min_sample_time_s = 1e-3;  ///< target GPU time of one sample
  std::size_t max_batch = 256;      ///< cap on launches per sample (the launch queue is finite)
  std::size_t batch = 0;            ///< fixed launches per sample; 0 = choose from the warm-up

  // Stream hold: launches are queued behind a held stream so host launch latency stays out
  // of the timed window. Code that synchronizes internally must opt out (hold = false).
  bool hold = true;              ///< hold the stream while queueing (cold, hot, graph)
  double hold_timeout_s = 10.0;  ///< release and fail with hold_timeout after this long

  // Power (NVML): average and peak power, energy, clocks, temperature and throttling over
  // the sampling window, which is stretched to at least power_window_s of GPU time so the
  // driver's energy counter and its ~1 s power average have something to measure.
  bool power = false;            ///< record power and energy (needs NVML; without it: a warning)
  double power_window_s = 0.5;   ///< minimum GPU time of the sampling window when power is on
  /// Back-to-back launches for this long (wall seconds) before the power window, so that the
  /// average describes the sustained draw: a capped GPU's power limiter lets a load that
  /// starts from idle run above the limit until it pulls the clocks down (measured in
  /// docs/power-and-serving.md). 0: the window starts with the load.
  double power_settle_s = 1.0;
  double power_interval_s = 0.005;  ///< NVML reading interval

  /// Back-to-back launches for this long (wall seconds) after the warm-up and before
  /// sampling, power or not, so the samples see the clocks this load sustains rather than a
  /// burst's (a power-capped GPU slows under sustained load). The algorithm search sets it
  /// for long candidates (ops/algorithm_search.hpp). With power on, the power settle
  /// follows it. 0: none.
  double settle_s = 0;

  /// Throws invalid_argument naming the first field that breaks its rule.
  void validate() const {
    auto require = [](bool ok, const char* what) {
      if (!ok) throw invalid_argument(std::string("measure_options: ") + what);
    };
    auto finite_nonneg = [](double v) { return std::isfinite(v) && v >= 0.0; };
    require(finite_nonneg(warmup_time_s), "warmup_time_s must be finite and >= 0");
    require(finite_nonneg(cooldown_s) && cooldown_s <= 600.0, "cooldown_s must be finite, >= 0 and <= 600");
    require(finite_nonneg(window_s) && window_s <= 600.0, "window_s must be finite, >= 0 and <= 600");
    require(finite_nonneg(timeout_s), "timeout_s must be finite and >= 0 (0: no budget)");
    require(min_samples >= 1, "min_samples must be >= 1");
    require(max_samples >= min_samples, "max_samples must be >= min_samples");
    require(finite_nonneg(min_gpu_time_s), "min_gpu_time_s must be finite and >= 0");
    require(std::isfinite(target_noise) && target_noise > 0.0, "target_noise must be finite and > 0");
    require(std::isfinite(max_wall_time_s) && max_wall_time_s > 0.0, "max_wall_time_s must be finite and > 0");
    require(finite_nonneg(min_sample_time_s), "min_sample_time_s must be finite and >= 0");
    require(max_batch >= 1, "max_batch must be >= 1");
    require(batch <= max_batch, "batch must be <= max_batch (0 chooses it from the warm-up)");
    require(std::isfinite(hold_timeout_s) && hold_timeout_s > 0.0, "hold_timeout_s must be finite and > 0");
    require(finite_nonneg(power_window_s), "power_window_s must be finite and >= 0");
    require(finite_nonneg(power_settle_s), "power_settle_s must be finite and >= 0");
    require(finite_nonneg(settle_s) && settle_s <= 600.0, "settle_s must be finite, >= 0 and <= 600");
    require(std::isfinite(power_interval_s) && power_interval_s > 0.0, "power_interval_s must be finite and > 0");
  }
};

/// Makes every process take the same launches, whatever its clocks: `warmup` warm-up
/// launches, `batch` launches per sample, exactly `samples` samples, and no phase or cap that
/// reads a clock (warm-up time, cool-down, settle, power, sampling window, wall and time
/// budgets). For code whose every launch is a collective across processes (NCCL under MPI):
/// a process that launched once more than the others would wait for them forever. The
/// stream is not held (each launch must reach the GPU while the other processes' wait).
/// Throws invalid_argument for zero samples, batch or a batch above max_batch.
inline void make_lockstep(measure_options& o, std::size_t samples, std::size_t batch, std::size_t warmup = 5) {
  if (samples == 0 || batch == 0) throw invalid_argument("make_lockstep: samples and batch must be >= 1");
  if (batch > o.max_batch) {
    throw invalid_argument("make_lockstep: batch " + std::to_string(batch) + " is above max_batch " + std::to_string(o.max_batch));
  }
  o.warmup_launches = warmup;
  o.warmup_time_s = 0;
  o.cooldown_s = 0;
  o.settle_s = 0;
  o.power = false;
  o.window_s = 0;
  o.timeout_s = 0;
  o.batch = batch;
  o.min_samples = o.max_samples = samples;
  o.min_gpu_time_s = 0;
  o.max_wall_time_s = 1e12;  // never: the sample count decides
  o.hold = false;
}

}  // namespace gpucmp
