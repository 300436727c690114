// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp::state, what a benchmark function receives: the Google Benchmark state, the engine,
// the timing mode, the measurement options and the declared work. run() measures and reports
// the record as Google Benchmark counters and a label.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/result_rows.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/serving/serving.hpp>
#include <gpucmp/specs/roofline.hpp>
#include <gpucmp/specs/work.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <optional>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// What a gpucmp benchmark function receives: the Google Benchmark state plus the engine,
/// the timing mode of this registration, the measurement options and the declared work.
class state {
 public:
  /// Used by the registration machinery; benchmark functions receive a ready state.
  state(benchmark::State& gb, std::string name, mode timing_mode, engine& eng, const measure_options& defaults)
      : m_gb(gb),
        m_name(std::move(name)),
        m_mode(timing_mode),
        m_engine(eng),
        m_options(detail::resolve_options(defaults, detail::flags_everywhere(), m_name)) {}
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  /// The underlying Google Benchmark state (for counters, labels, ...).
  benchmark::State& gbench() noexcept { return m_gb; }
  /// Argument `index` of this benchmark instance (as benchmark::State::range).
  std::int64_t range(std::size_t index = 0) const { return m_gb.range(index); }
  /// The registration's name, "<function>/<mode>" (Google Benchmark appends the arguments).
  const std::string& name() const noexcept { return m_name; }
  /// The timing mode of this registration.
  mode timing_mode() const noexcept { return m_mode; }
  /// Measurement options; change them before run().
  measure_options& options() noexcept { return m_options; }
  /// The stream measurements run on: enqueue set-up work here, or on any stream you synchronize.
  cudaStream_t stream() const noexcept { return m_engine.stream(); }
  /// Facts of the device the benchmark runs on.
  const device_info& device() const noexcept { return m_engine.device(); }
  /// The engine run() measures with (an operation's search times through it too).
  gpucmp::engine& measuring_engine() noexcept { return m_engine; }

  /// Declares the work one launch does (replaces earlier declarations).
  void set_work(const work& w) {
    w.validate();
    m_work = w;
  }
  /// Adds FLOPs per launch.
  void add_flops(double flops) { add(&work::flops, flops); }
  /// Adds bytes read from device memory per launch.
  void add_bytes_read(double bytes) { add(&work::bytes_read, bytes); }
  /// Adds bytes written to device memory per launch.
  void add_bytes_written(double bytes) { add(&work::bytes_written, bytes); }
  /// Adds domain items (elements, images, ...) per launch.
  void add_items(double items) { add(&work::items, items); }
  /// The precision the declared FLOPs run in, which selects the peak for % of peak.
  void set_precision(precision p) { m_work.arithmetic = p; }
  /// The structure the declared FLOPs exploit: 2:4 selects the datasheet's sparse peak.
  void set_sparsity(sparsity s) { m_work.structure = s; }
  /// The work declared so far.
  const work& declared_work() const noexcept { return m_work; }

  /// Describes the measured problem in the result row (measure/result_schema.hpp), so readers
  /// take its facts from typed axes, never from the benchmark's name: a numeric parameter
  /// ("m", "bytes", "from") or a text one ("dtype", "layout").
  void set_axis(const std::string& name, double value) { m_described.set(axis::of(name, value)); }
  void set_axis(const std::string& name, const std::string& value) { m_described.set(axis::of(name, value)); }  ///< see above
  void set_axis(const std::string& name, const char* value) { set_axis(name, std::string(value)); }  ///< see above
  /// The numeric axis this benchmark sweeps: the report draws rows alike in every other axis
  /// as one curve over it. Throws invalid_argument unless it is a numeric axis set before.
  void set_sweep_axis(const std::string& name) {
    const axis* a = m_described.find(name);
    if (a == nullptr || !a->number) throw invalid_argument("gpucmp::state::set_sweep_axis: '" + name + "' is not a numeric axis set before");
    m_described.sweep_axis = name;
  }
  /// What ran it ("cuBLASLt", "cuDNN", "NCCL", "gpucmp kernel", ...).
  void set_provider(const std::string& provider) { m_described.provider = provider; }
  /// The algorithm it ran.
  void set_algorithm(const std::string& algorithm) { m_described.algorithm = algorithm; }
  /// A library version that ran it, read at run time ("cudnn", "91900").
  void add_library(const std::string& name, const std::string& version) { m_described.libraries.emplace_back(name, version); }
  /// Everything described so far (run_verified adds the verification and the search here).
  row_description& description() noexcept { return m_described; }

  /// Adds a note to the result's label (e.g. the algorithm an operation chose, how it was
  /// verified); notes come first, separated by "; ".
  void add_note(const std::string& note) { m_notes.push_back(note); }

  /// Measures `launch(cudaStream_t)` and reports the result to Google Benchmark. Call once.
  template <class Launch>
  void run(Launch&& launch) {
    if (m_measurement) throw invalid_argument("gpucmp::state::run was called twice in one benchmark");
    m_measurement = std::make_unique<measurement>(m_engine.try_measure(launch, m_mode, m_options));
    report();
  }

  /// Serves requests `launch(stream)` as `options` says (serving/serving.hpp: rounds timed
  /// through this benchmark's engine; the command line's --gpucmp_power, cool-down and time
  /// budget apply) and reports the run: its row carries the latency percentiles and rates
  /// (key "latency"), its time is the median of the rounds' median latencies, the counters
  /// say p50/p99/p99.9 and requests per second. Call once, instead of run().
  template <class Launch>
  serving_result run_serving(Launch&& launch, serving_options options) {
    if (m_measurement) throw invalid_argument("gpucmp::state::run_serving: the benchmark was already measured");
    options.measuring.power = options.measuring.power || m_options.power;
    options.measuring.cooldown_s = std::max(options.measuring.cooldown_s, m_options.cooldown_s);
    if (m_options.timeout_s > 0) options.measuring.timeout_s = m_options.timeout_s;
    if (options.measuring.name.empty()) options.measuring.name = m_options.name;
    set_axis("pattern", to_string(options.pattern));
    if (options.pattern != arrival_pattern::closed_loop) set_axis("rate_per_s", options.rate_per_s);
    serving_result served = serve(std::forward<Launch>(launch), options, m_engine);
    m_measurement = std::make_unique<measurement>(served.rounds);
    if (!served.latencies_s.empty()) {
      const latency_summary& l = served.latency;
      m_latency = row_latency{to_string(options.pattern), double(l.count), served.offered_per_s, served.achieved_per_s,
                              l.p50, l.p90, l.p99, l.p999, l.max, l.mean};
    }
    report();
    if (m_latency && m_measurement->ok()) {
      auto& c = m_gb.counters;
      c["latency_p50_us"] = m_latency->p50 * 1e6;
      c["latency_p99_us"] = m_latency->p99 * 1e6;
      c["latency_p999_us"] = m_latency->p999 * 1e6;
      c["requests_per_s"] = m_latency->achieved_per_s;
    }
    return served;
  }

  /// Skips this benchmark with `reason` (not counted as a failure).
  void skip(const std::string& reason) {
    m_skipped = true;
    result_row row = detail::unmeasured_row(m_mode, result_status::skipped, reason);
    row.declared = m_work;
    row.described = m_described;
    detail::record_row(m_gb, m_name, std::move(row));
    m_gb.SkipWithError(reason.c_str());
  }

  /// The measurement, after run(); nullptr before.
  const measurement* result() const noexcept { return m_measurement.get(); }
  /// True once run() or skip() was called.
  bool finished() const noexcept { return m_measurement != nullptr || m_skipped; }

 private:
  void add(double work::*field, double value) {
    work w = m_work;
    w.*field += value;
    set_work(w);
  }

  void report() {
    const measurement& r = *m_measurement;
    result_row row = detail::measured_row(r, m_work, m_described);
    row.latency = m_latency;
    detail::record_row(m_gb, m_name, std::move(row));
    if (!r.ok()) {
      if (r.status != result_status::failed) {  // oom, unsupported, timeout: a typed result, not a failure
        m_gb.SkipWithError(r.message.c_str());
        return;
      }
      detail::report_failure(m_gb, m_name, "failed: " + r.message);
      return;
    }
    for (auto _ : m_gb) m_gb.SetIterationTime(r.gpu.median);
    auto& c = m_gb.counters;
    const double us = 1e6;
    c["min_us"] = r.gpu.min * us;
    c["mean_us"] = r.gpu.mean * us;
    c["stddev_us"] = r.gpu.stddev * us;
    c["p10_us"] = r.gpu.p10 * us;
    c["p90_us"] = r.gpu.p90 * us;
    c["p99_us"] = r.gpu.p99 * us;
    c["max_us"] = r.gpu.max * us;
    c["noise_pct"] = r.gpu.relative_noise * 100.0;
    c["wall_us"] = r.wall.median * us;
    c["samples"] = static_cast<double>(r.gpu.count);
    c["batch"] = static_cast<double>(r.batch);
    if (r.cooldown_s > 0) c["cooldown_s"] = r.cooldown_s;
    if (r.settle_s > 0) c["settle_s"] = r.settle_s;
    if (r.power_settle_s > 0) c["power_settle_s"] = r.power_settle_s;
    if (r.window_s > 0) {  // a fixed window is compared with a peer timed alike: say how
      c["window_s"] = r.window_s;
      c["warmup_s"] = r.warmup_wall_s;
    }
    std::string label;
    if (!m_work.empty()) {
      const rates at = rates_for(m_work, r.gpu.median);
      if (m_work.flops > 0) c["TFLOP/s"] = at.flop_per_s * 1e-12;
      if (m_work.bytes() > 0) c["GB/s"] = at.bytes_per_s * 1e-9;
      if (m_work.items > 0) c["items/s"] = at.items_per_s;
      // Against the datasheet: % of the peak of the ceiling that binds, and the intensity.
      const roofline_point p = place_on_roofline(m_work, r.gpu.median, detail::spec_of(m_engine.device()));
      const double fraction =
          p.bound == roofline_bound::compute ? p.fraction_of_peak_compute : p.fraction_of_peak_bandwidth;
      if (std::isfinite(fraction)) c["pct_of_peak"] = 100.0 * fraction;
      if (std::isfinite(p.arithmetic_intensity)) c["flop_per_byte"] = p.arithmetic_intensity;
      if (p.bound != roofline_bound::unknown) label = std::string(to_string(p.bound)) + "-bound";
      if (p.fits_in_l2) label += std::string(label.empty() ? "" : "; ") + "working set fits in L2: not DRAM bandwidth";
    }
    if (r.power) report_power(*r.power, r.gpu.median);
    if (r.kernels) {
      c["span_us"] = r.kernels->span.median * us;
      c["idle_us"] = r.kernels->idle.median * us;
      c["traced_event_us"] = r.kernels->traced_event.median * us;
      label = kernels_label(*r.kernels) + (label.empty() ? "" : "; " + label);
      detail::kernel_breakdowns().push_back({m_name, r.kernels->kernels});
    }
    for (const auto& w : r.warnings) label += (label.empty() ? "" : "; ") + w;
    for (auto n = m_notes.rbegin(); n != m_notes.rend(); ++n) label = *n + (label.empty() ? "" : "; " + label);
    if (!label.empty()) m_gb.SetLabel(label);
  }

  // Power counters: average and peak W over the window, J per launch (average power x the
  // per-launch median), perf/W for the declared work, clocks, temperature, throttling.
  void report_power(const power_record& p, double seconds_per_launch) {
    auto& c = m_gb.counters;
    c["power_w"] = p.average_w;
    c["power_peak_w"] = p.peak_w;
    c["energy_window_j"] = p.energy_j;
    c["J_per_launch"] = p.average_w * seconds_per_launch;
    if (p.power_limit_w > 0) c["power_limit_w"] = p.power_limit_w;
    c["sm_clock_start_mhz"] = p.sm_clock_start_mhz;
    c["sm_clock_end_mhz"] = p.sm_clock_end_mhz;
    c["memory_clock_mhz"] = p.memory_clock_end_mhz;
    c["temperature_max_c"] = p.temperature_max_c;
    c["throttled_pct"] = p.samples > 0 ? 100.0 * double(p.throttled_samples) / double(p.samples) : 0.0;
    if (p.average_w > 0 && !m_work.empty()) {
      const rates at = rates_for(m_work, seconds_per_launch);
      if (m_work.flops > 0) c["TFLOP/s/W"] = at.flop_per_s * 1e-12 / p.average_w;
      if (m_work.bytes() > 0) c["GB/s/W"] = at.bytes_per_s * 1e-9 / p.average_w;
      if (m_work.items > 0) {
        c["items/s/W"] = at.items_per_s / p.average_w;
        c["J_per_item"] = p.average_w * seconds_per_launch / m_work.items;
      }
    }
  }

  // The three largest kernels with their share of the busy time, e.g.
  // "kernels: sm90_xmma_gemm_bf16... 99.8% (1/launch)".
  static std::string kernels_label(const kernel_profile& p) {
    std::string label = "kernels:";
    for (std::size_t i = 0; i < p.kernels.size() && i < 3; ++i) {
      const kernel_stat& k = p.kernels[i];
      std::string name = k.name.size() > 60 ? k.name.substr(0, 57) + "..." : k.name;
      char tail[64];
      std::snprintf(tail, sizeof tail, " %.1f%% (%g/launch)", 100.0 * k.share, k.per_launch);
      label += (i == 0 ? " " : "; ") + name + tail;
    }
    if (p.kernels.size() > 3) label += "; +" + std::to_string(p.kernels.size() - 3) + " more";
    return label;
  }

  benchmark::State& m_gb;
  std::string m_name;
  mode m_mode;
  engine& m_engine;
  measure_options m_options;
  work m_work;
  row_description m_described;
  std::optional<row_latency> m_latency;  ///< run_serving's latencies
  std::unique_ptr<measurement> m_measurement;
  std::vector<std::string> m_notes;
  bool m_skipped = false;
};

}  // namespace gpucmp
