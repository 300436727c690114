// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Google Benchmark adapter: registers GPU benchmarks whose time is the engine's per-launch
// GPU median (manual time), with declared work turned into rate counters and the GPU's
// facts in the JSON context. Errors become SkipWithError and the run goes on.
//
// Each registration runs exactly one iteration (Iterations(1)): the engine has its own
// stopping rule, so Google Benchmark's iteration-growth probes, which would rerun the
// function and its GPU allocations, are switched off. --benchmark_repetitions still works
// and repeats the whole measurement.
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/specs/device_specs.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/power/nvml.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/specs/roofline.hpp>
#include <gpucmp/version.hpp>
#include <gpucmp/specs/work.hpp>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
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

/// One engine per device, created on first use and kept for the whole process, so the
/// stream, events, L2 flush buffer and stream hold are allocated once.
inline engine& engine_for_current_device() {
  static std::map<int, std::unique_ptr<engine>> engines;
  const int ordinal = current_device();
  auto& slot = engines[ordinal];
  if (!slot) slot = std::make_unique<engine>(ordinal);
  return *slot;
}

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

/// What a gpucmp benchmark function receives: the Google Benchmark state plus the engine,
/// the timing mode of this registration, the measurement options and the declared work.
class state {
 public:
  /// Used by the registration machinery; benchmark functions receive a ready state.
  state(benchmark::State& gb, std::string name, mode timing_mode, engine& eng, const measure_options& defaults)
      : m_gb(gb), m_name(std::move(name)), m_mode(timing_mode), m_engine(eng), m_options(defaults) {
    if (m_options.name.empty()) m_options.name = m_name;
    const detail::gpucmp_flags& flags = detail::flags_everywhere();
    if (flags.power) m_options.power = true;
    if (flags.batch > 0) m_options.batch = flags.batch;
    if (flags.cooldown_s > 0) m_options.cooldown_s = flags.cooldown_s;
    if (flags.warmup_s > 0) m_options.warmup_time_s = flags.warmup_s;
    if (flags.window_s > 0) m_options.window_s = flags.window_s;
    if (flags.timeout_s > 0) m_options.timeout_s = flags.timeout_s;
  }
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
  /// The work declared so far.
  const work& declared_work() const noexcept { return m_work; }

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

  /// Skips this benchmark with `reason` (not counted as a failure).
  void skip(const std::string& reason) {
    m_skipped = true;
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
  std::unique_ptr<measurement> m_measurement;
  std::vector<std::string> m_notes;
  bool m_skipped = false;
};

namespace detail {

/// Runs `body(state&)` for one registration, turning every error into SkipWithError.
template <class Body>
void run_guarded(benchmark::State& gb, const std::string& name, mode m, const measure_options& defaults, Body&& body) {
  const std::string& no_device = cached_no_device_reason();
  if (!no_device.empty()) {
    tally().no_device = true;
    gb.SkipWithError(no_device.c_str());
    return;
  }
  if (!tally().context_lost_in.empty()) {  // nothing can run on a lost context; do not touch the GPU
    const std::string why = "skipped: the CUDA context was lost after an error in " + tally().context_lost_in;
    gb.SkipWithError(why.c_str());
    return;
  }
  try {
    state st(gb, name, m, engine_for_current_device(), defaults);
    body(st);
    if (!st.finished()) report_failure(gb, name, "failed: the benchmark function returned without calling gpucmp::state::run");
  } catch (const unsupported& e) {
    gb.SkipWithError(e.what());  // this GPU cannot run it: a typed result, not a failure
  } catch (const out_of_memory& e) {
    gb.SkipWithError(e.what());  // does not fit: a typed result (needed vs free), not a failure
  } catch (const timeout_error& e) {
    gb.SkipWithError(e.what());  // ran past its budget: a typed result, and the run goes on
  } catch (const std::exception& e) {
    report_failure(gb, name, std::string("failed: ") + e.what());
  } catch (...) {
    report_failure(gb, name, "failed: unknown exception");
  }
}

inline std::vector<mode> modes_or_default(std::initializer_list<mode> modes) {
  if (modes.size() == 0) return {mode::hot};
  return {modes.begin(), modes.end()};
}

/// Google Benchmark's registration object: the Benchmark class of its internal namespace up to 1.8
/// and benchmark::Benchmark since (main deprecates the internal name). Named through what
/// benchmark::RegisterBenchmark returns, so the adapter uses no internal name.
using gbench_registration =
    std::remove_pointer_t<decltype(benchmark::RegisterBenchmark("", std::declval<void (*)(benchmark::State&)>()))>;

inline void configure_defaults(gbench_registration* b) {
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
}

}  // namespace detail

/// The Google Benchmark registrations of one gpucmp benchmark, one per timing mode; each
/// configuration call is forwarded to all of them (same names as Google Benchmark's own).
class benchmark_group {
 public:
  /// Wraps registrations that share `options`.
  benchmark_group(std::vector<detail::gbench_registration*> registrations,
                  std::shared_ptr<measure_options> options)
      : m_registrations(std::move(registrations)), m_options(std::move(options)) {}

  /// Measurement options every instance starts from (a benchmark may still change them).
  benchmark_group* Options(const measure_options& options) {
    options.validate();
    *m_options = options;
    return this;
  }
  /// Opt out of the stream hold, for code that synchronizes internally.
  benchmark_group* NoHold() {
    m_options->hold = false;
    return this;
  }
  benchmark_group* Arg(std::int64_t x) { return each([&](auto* b) { b->Arg(x); }); }
  benchmark_group* Args(const std::vector<std::int64_t>& args) { return each([&](auto* b) { b->Args(args); }); }
  benchmark_group* Range(std::int64_t lo, std::int64_t hi) { return each([&](auto* b) { b->Range(lo, hi); }); }
  benchmark_group* DenseRange(std::int64_t start, std::int64_t limit, int step = 1) {
    return each([&](auto* b) { b->DenseRange(start, limit, step); });
  }
  benchmark_group* Ranges(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
    return each([&](auto* b) { b->Ranges(ranges); });
  }
  benchmark_group* ArgsProduct(const std::vector<std::vector<std::int64_t>>& lists) {
    return each([&](auto* b) { b->ArgsProduct(lists); });
  }
  benchmark_group* RangeMultiplier(int multiplier) { return each([&](auto* b) { b->RangeMultiplier(multiplier); }); }
  benchmark_group* ArgName(const std::string& name) { return each([&](auto* b) { b->ArgName(name); }); }
  benchmark_group* ArgNames(const std::vector<std::string>& names) { return each([&](auto* b) { b->ArgNames(names); }); }
  benchmark_group* Unit(benchmark::TimeUnit unit) { return each([&](auto* b) { b->Unit(unit); }); }
  benchmark_group* Repetitions(int n) { return each([&](auto* b) { b->Repetitions(n); }); }
  /// Any other Google Benchmark configuration, applied to each registration.
  benchmark_group* Apply(void (*custom)(detail::gbench_registration*)) {
    return each([&](auto* b) { b->Apply(custom); });
  }
  /// The underlying registrations, one per mode.
  const std::vector<detail::gbench_registration*>& registrations() const noexcept { return m_registrations; }

 private:
  template <class F>
  benchmark_group* each(F&& f) {
    for (auto* b : m_registrations) f(b);
    return this;
  }

  std::vector<detail::gbench_registration*> m_registrations;
  std::shared_ptr<measure_options> m_options;
};

/// Registers `fn(gpucmp::state&)` once per mode as "<name>/<mode>" (default mode: hot).
template <class Function>
benchmark_group* register_benchmark(const std::string& name, Function fn, std::initializer_list<mode> modes = {}) {
  auto options = std::make_shared<measure_options>();
  std::vector<detail::gbench_registration*> registrations;
  for (mode m : detail::modes_or_default(modes)) {
    const std::string full_name = name + "/" + to_string(m);
    auto* b = benchmark::RegisterBenchmark(full_name.c_str(), [fn, m, options, full_name](benchmark::State& gb) {
      detail::run_guarded(gb, full_name, m, *options, fn);
    });
    detail::configure_defaults(b);
    registrations.push_back(b);
  }
  return new benchmark_group(std::move(registrations), std::move(options));  // lives as long as the registry
}

/// Registers `fn(gpucmp::state&)` once, in mode `m`, under exactly `name` (no mode suffix:
/// for names that say the mode their own way, e.g. "resnet50/fp16/bs64/eager").
template <class Function>
benchmark_group* register_benchmark_as(const std::string& name, mode m, Function fn) {
  auto options = std::make_shared<measure_options>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [fn, m, options, name](benchmark::State& gb) {
    detail::run_guarded(gb, name, m, *options, fn);
  });
  detail::configure_defaults(b);
  return new benchmark_group({b}, std::move(options));  // lives as long as the registry
}

namespace detail {

/// Runs a fixture (a benchmark::Fixture subclass with `void gpucmp_measure(gpucmp::state&)`)
/// with SetUp and TearDown inside the error guard, so an allocation failure in SetUp is a
/// result, not a crash.
template <class Fixture>
void run_fixture(Fixture& fixture, benchmark::State& gb, const std::string& name, mode m, const measure_options& options) {
  bool set_up = false;
  run_guarded(gb, name, m, options, [&](state& st) {
    fixture.SetUp(gb);
    set_up = true;
    fixture.gpucmp_measure(st);
  });
  if (set_up) {
    try {
      fixture.TearDown(gb);
    } catch (const std::exception& e) {
      report_failure(gb, name, std::string("failed in TearDown: ") + e.what());
    }
  }
}

/// Registers one instance of `Fixture` per mode (Google Benchmark, too, keeps one fixture
/// object per registration), through the public RegisterBenchmark.
template <class Fixture>
benchmark_group* register_fixture(const std::string& name, std::initializer_list<mode> modes) {
  auto options = std::make_shared<measure_options>();
  std::vector<gbench_registration*> registrations;
  for (mode m : modes_or_default(modes)) {
    const std::string full_name = name + "/" + to_string(m);
    auto fixture = std::make_shared<Fixture>();
    auto* b = benchmark::RegisterBenchmark(full_name.c_str(), [fixture, full_name, m, options](benchmark::State& gb) {
      run_fixture(*fixture, gb, full_name, m, *options);
    });
    configure_defaults(b);
    registrations.push_back(b);
  }
  return new benchmark_group(std::move(registrations), std::move(options));
}

}  // namespace detail

/// Records the device's and library's facts in the JSON "context" (once per process; a
/// no-op without a device). GPUCMP_BENCHMARK_MAIN calls it; call it yourself in a custom main.
inline void add_context() {
  static bool added = false;
  if (added) return;
  added = true;
  benchmark::AddCustomContext("gpucmp_version", version_string);
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
    for (const auto& [key, value] : nvml_context(d)) benchmark::AddCustomContext(key, value);
  } catch (const std::exception& e) {
    benchmark::AddCustomContext("gpu", std::string("device query failed: ") + e.what());
  }
}

namespace detail {

inline std::string json_escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

/// Writes every kernel-mode breakdown of this process as JSON; false when the file cannot be written.
inline bool write_kernel_breakdowns(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return false;
  std::fprintf(file, "{\n  \"gpucmp_version\": \"%s\",\n  \"breakdowns\": [", version_string);
  const auto& list = kernel_breakdowns();
  for (std::size_t b = 0; b < list.size(); ++b) {
    std::fprintf(file, "%s\n    {\"benchmark\": \"%s\", \"kernels\": [", b ? "," : "", json_escape(list[b].benchmark).c_str());
    for (std::size_t k = 0; k < list[b].kernels.size(); ++k) {
      const kernel_stat& s = list[b].kernels[k];
      std::fprintf(file,
                   "%s\n      {\"name\": \"%s\", \"kind\": \"%s\", \"count\": %zu, \"per_launch\": %.6g, "
                   "\"total_s\": %.9g, \"median_s\": %.9g, \"share\": %.6g}",
                   k ? "," : "", json_escape(s.name).c_str(), to_string(s.kind), s.count, s.per_launch, s.total_s,
                   s.median_s, s.share);
    }
    std::fprintf(file, "\n    ]}");
  }
  std::fprintf(file, "\n  ]\n}\n");
  return std::fclose(file) == 0;
}

}  // namespace detail

namespace detail {

/// "" when `path` can be written (an existing file is left as it was, a new one removed
/// again), else why not; checked before anything is measured, so no measurement is lost.
inline std::string unwritable_reason(const std::string& path) {
  std::FILE* existing = std::fopen(path.c_str(), "rb");
  const bool existed = existing != nullptr;
  if (existing != nullptr) std::fclose(existing);
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) return std::strerror(errno);
  std::fclose(file);
  if (!existed) std::remove(path.c_str());
  return "";
}

/// The output files a command line names (--benchmark_out=FILE and --gpucmp_kernels_out=FILE)
/// that cannot be written, each with its flag and the reason; empty when all can be.
inline std::vector<std::string> unwritable_outputs(int argc, char** argv, const gpucmp_flags& flags) {
  std::vector<std::string> problems;
  auto check = [&](const std::string& flag, const std::string& path) {
    if (path.empty()) return;
    const std::string why = unwritable_reason(path);
    if (!why.empty()) problems.push_back(flag + "=" + path + ": cannot be written (" + why + ")");
  };
  const std::string out_flag = "--benchmark_out=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(out_flag, 0) == 0) check("--benchmark_out", arg.substr(out_flag.size()));
  }
  check("--gpucmp_kernels_out", flags.kernels_out);
  return problems;
}

}  // namespace detail

/// A complete main: parses Google Benchmark flags (plus --gpucmp_power, which records power,
/// energy and perf/W for every benchmark, --gpucmp_batch=N, which times N launches per
/// sample everywhere, --gpucmp_cooldown_s=X, which idles X seconds before every warm-up,
/// --gpucmp_warmup_s=X and --gpucmp_window_s=X, which fix every warm-up's minimum time and
/// every sampling window (GPU seconds),
/// and --gpucmp_kernels_out=FILE, which writes every kernel-mode breakdown
/// as JSON), adds the context, runs the registered benchmarks and returns an exit_status (77
/// when there is no CUDA device).
inline int benchmark_main(int argc, char** argv) {
  const detail::gpucmp_flags flags = detail::take_gpucmp_flags(argc, argv);
  if (!flags.error.empty()) {
    std::fprintf(stderr, "gpucmp: %s\n", flags.error.c_str());
    return exit_failures;
  }
  detail::flags_everywhere() = flags;
  const std::vector<std::string> unwritable = detail::unwritable_outputs(argc, argv, flags);
  for (const auto& problem : unwritable) std::fprintf(stderr, "gpucmp: %s; nothing was measured\n", problem.c_str());
  if (!unwritable.empty()) return exit_failures;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return exit_failures;
  add_context();
  const std::string& no_device = detail::cached_no_device_reason();
  if (!no_device.empty()) std::fprintf(stderr, "gpucmp: %s; every GPU benchmark is skipped\n", no_device.c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!flags.kernels_out.empty() && !detail::write_kernel_breakdowns(flags.kernels_out)) {
    std::fprintf(stderr, "gpucmp: cannot write kernel breakdowns to %s\n", flags.kernels_out.c_str());
    return exit_failures;
  }
  if (detail::tally().no_device) return exit_no_device;
  const detail::run_tally& t = detail::tally();
  if (!t.failed_names.empty()) {
    std::fprintf(stderr, "gpucmp: %d benchmark(s) failed:\n", t.failed);
    for (const auto& f : t.failed_names) std::fprintf(stderr, "  %s\n", f.c_str());
  }
  if (!t.context_lost_in.empty()) {
    std::fprintf(stderr, "gpucmp: the CUDA context was lost after an error in %s; every later benchmark was skipped\n",
                 t.context_lost_in.c_str());
  }
  return t.failed > 0 ? exit_failures : exit_ok;
}

}  // namespace gpucmp

#define GPUCMP_DETAIL_CONCAT2(a, b) a##b
#define GPUCMP_DETAIL_CONCAT(a, b) GPUCMP_DETAIL_CONCAT2(a, b)
#define GPUCMP_DETAIL_UNIQUE(prefix) GPUCMP_DETAIL_CONCAT(prefix, __COUNTER__)
// The trailing empty argument keeps `...` non-empty in C++17; `{a, b, }` is a valid list.
#define GPUCMP_DETAIL_BENCHMARK(fn, ...) \
  static ::gpucmp::benchmark_group* GPUCMP_DETAIL_UNIQUE(gpucmp_benchmark_) = ::gpucmp::register_benchmark(#fn, fn, {__VA_ARGS__})
#define GPUCMP_DETAIL_REGISTER_F(Base, Method, ...)                                                              \
  static ::gpucmp::benchmark_group* GPUCMP_DETAIL_UNIQUE(gpucmp_fixture_) =                                      \
      ::gpucmp::detail::register_fixture<Base##_##Method##_gpucmp>(#Base "/" #Method, {__VA_ARGS__})

/// Registers `void fn(gpucmp::state&)`, optionally followed by modes (default: hot):
/// `GPUCMP_BENCHMARK(fn, gpucmp::mode::cold, gpucmp::mode::hot)->Arg(1 << 20);`
#define GPUCMP_BENCHMARK(...) GPUCMP_DETAIL_BENCHMARK(__VA_ARGS__, )

/// Defines method `Method` of fixture `Base` (a benchmark::Fixture); follow with
/// `(gpucmp::state& st) { ... }`, as with BENCHMARK_DEFINE_F.
#define GPUCMP_BENCHMARK_DEFINE_F(Base, Method)                   \
  class Base##_##Method##_gpucmp : public Base {                 \
   public:                                                       \
    void gpucmp_measure(::gpucmp::state&);                       \
                                                                 \
   protected:                                                    \
    void BenchmarkCase(::benchmark::State&) override {} /* unused: the adapter drives the fixture */ \
  };                                                             \
  void Base##_##Method##_gpucmp::gpucmp_measure

/// Registers a fixture method, optionally followed by modes: `GPUCMP_BENCHMARK_REGISTER_F(F, M, gpucmp::mode::cold)`.
#define GPUCMP_BENCHMARK_REGISTER_F(...) GPUCMP_DETAIL_REGISTER_F(__VA_ARGS__, )

/// A main() that runs every registered benchmark; see gpucmp::benchmark_main for the exit status.
#define GPUCMP_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return ::gpucmp::benchmark_main(argc, argv); }
