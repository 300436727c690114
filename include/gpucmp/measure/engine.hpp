// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The measurement engine: warms a callable up, takes samples in cold, hot, graph or kernel
// mode until the stopping rule is satisfied, and returns a plain measurement record.
// It never prints and does not depend on Google Benchmark (nor on CUPTI: kernel mode goes
// through the activity_tracer that <gpucmp/measure/kernel_trace.hpp> registers).
#pragma once

#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/measure/l2_flush.hpp>
#include <gpucmp/cuda/nvtx.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/power/power_monitor.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/measure/stopping.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/measure/stream_hold.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpucmp {

/// Measures callables `void(cudaStream_t)` that enqueue GPU work on the stream they are given.
/// Owns, on one device: the measurement stream, a capture stream, the timing events, and
/// (created on first need) the L2 flush buffer, the stream hold and the activity tracer.
/// Reuse one engine for many measurements so none of this is allocated again. Not
/// thread-safe; not copyable.
class engine {
 public:
  /// An engine on device `ordinal`.
  explicit engine(int ordinal) : engine(ordinal, device_guard(ordinal)) {}
  /// An engine on the calling thread's current device.
  engine() : engine(current_device()) {}
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Facts of the engine's device, read when the engine was made.
  const device_info& device() const noexcept { return m_device; }
  /// The stream every measurement runs on.
  cudaStream_t stream() const noexcept { return m_stream.get(); }

  /// Measures `launch` in mode `m`; throws gpucmp::error (cuda_error, hold_timeout,
  /// out_of_memory, invalid_argument, ...) on failure.
  template <class Launch>
  measurement measure(Launch&& launch, mode m, const measure_options& options = {}) {
    measurement record;
    run(launch, m, options, record);
    return record;
  }

  /// Like measure(), but a failure becomes the record's status and message; samples taken
  /// before the failure are kept.
  template <class Launch>
  measurement try_measure(Launch&& launch, mode m, const measure_options& options = {}) noexcept {
    measurement record;
    record.timing_mode = m;
    run_typed(record, "unknown exception from the measured callable", [&] { run(launch, m, options, record); });
    return record;
  }

  /// What one round of host-paced work (measure_rounds) gives the engine.
  struct round_result {
    double sample_s = 0;  ///< the round's sample: seconds (a round's median request latency, a launch's GPU time)
    double gpu_s = 0;     ///< GPU time the round kept the device busy (counts towards min_gpu_time_s and power_window_s)
  };

  /// A round's view of the engine's stream hold: the round queues its work behind the held
  /// stream (other streams wait on an event recorded on it), then releases it.
  class round_hold {
   public:
    /// Releases the held stream; throws hold_timeout when the watchdog released it first
    /// (the round blocked while it was held). Nothing without a hold; a second call does nothing.
    void release() {
      if (m_hold == nullptr) return;
      stream_hold* hold = m_hold;
      m_hold = nullptr;
      if (!hold->release()) {
        throw hold_timeout("stream hold timed out while a round queued its work: the round blocked while its stream was "
                           "held (it must only queue work before release())");
      }
    }
    /// Whether the round's stream is held until release().
    bool held() const noexcept { return m_hold != nullptr; }
    ~round_hold() {
      if (m_hold != nullptr) m_hold->release();
    }
    round_hold(const round_hold&) = delete;
    round_hold& operator=(const round_hold&) = delete;

   private:
    friend class engine;
    explicit round_hold(stream_hold* hold) : m_hold(hold) {}
    stream_hold* m_hold;
  };

  /// Measures host-paced work in rounds: `round(stream, hold)` runs one round (a serving
  /// run's requests on their arrival schedule; a concurrency level's launches on its streams)
  /// and returns a round_result. It gets what every measurement gets: the cool-down, warm-up
  /// rounds (at least one, for options.warmup_time_s), the power window around the sampled
  /// rounds, the stopping rule over the rounds' samples, the time budget. With `hold` (and
  /// options.hold) the stream is held before each round, which queues its work behind it
  /// and calls hold.release(); host-paced rounds that wait on their own work pass false.
  /// No batch and no graph: a round paces its own launches. A failure becomes the record's
  /// status and message (as try_measure); the samples taken before it are kept.
  template <class Round>
  measurement try_measure_rounds(Round&& round, const measure_options& options, bool hold) noexcept {
    measurement record;
    record.timing_mode = mode::hot;
    run_typed(record, "unknown exception from the measured round", [&] { run_rounds(round, options, hold, record); });
    return record;
  }

 private:
  using clock = std::chrono::steady_clock;

  engine(int ordinal, const device_guard&) : m_device(query_device(ordinal)) {}

  static double seconds_since(clock::time_point start) {
    return std::chrono::duration<double>(clock::now() - start).count();
  }

  static void check_launch(const char* phase, std::size_t index) {
    const cudaError_t code = cudaGetLastError();
    if (code != cudaSuccess) {
      const std::string where = std::string("launch ") + std::to_string(index) + " of the measured callable (" + phase + ")";
      detail::throw_cuda_error(code, where.c_str(), __FILE__, __LINE__);
    }
  }

  // Waits for `done`; with a time budget it polls, so a launch that runs past the budget
  // ends the measurement as a timeout instead of blocking the process (the launch itself
  // runs on, and later work on the stream queues behind it).
  void wait(const event& done, const char* phase) {
    if (!m_deadline) {
      done.synchronize();
      return;
    }
    for (;;) {
      const cudaError_t state = cudaEventQuery(done.get());
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) detail::throw_cuda_error(state, "cudaEventQuery (waiting for the GPU)", __FILE__, __LINE__);
      check_deadline(phase);
      std::this_thread::yield();
    }
  }

  // Throws timeout_error once the measurement's budget is spent.
  void check_deadline(const char* phase) const {
    if (!m_deadline || clock::now() < *m_deadline) return;
    char text[256];
    std::snprintf(text, sizeof text, "the measurement ran past its %g s budget (measure_options::timeout_s) during %s",
                  m_timeout_s, phase);
    throw timeout_error(text);
  }

  // Runs `measure`; a failure becomes the record's typed status and message (unknown: a
  // throw of something that is not a std::exception).
  template <class Measure>
  static void run_typed(measurement& record, const char* unknown, Measure&& measure) noexcept {
    try {
      measure();
    } catch (const out_of_memory& e) {
      fail(record, result_status::out_of_memory, e.what());
    } catch (const unsupported& e) {
      fail(record, result_status::unsupported, e.what());
    } catch (const timeout_error& e) {
      fail(record, result_status::timeout, e.what());
    } catch (const std::exception& e) {
      fail(record, result_status::failed, e.what());
    } catch (...) {
      fail(record, result_status::failed, unknown);
    }
  }

  static void fail(measurement& record, result_status status, const char* message) noexcept {
    try {
      record.status = status;
      record.message = message;
      if (!record.gpu_s.empty()) {
        record.gpu = summarize(record.gpu_s);
        record.wall = summarize(record.wall_s);
      }
    } catch (...) {
      record.status = status;  // keep the status even if the message could not be stored
    }
  }

  // Holds the stream for one sample; the destructor releases it on every path.
  class hold_scope {
   public:
    hold_scope(stream_hold* hold, cudaStream_t stream, double timeout_s) : m_hold(hold) {
      if (m_hold != nullptr) m_hold->hold(stream, timeout_s);
    }
    ~hold_scope() { release(); }
    hold_scope(const hold_scope&) = delete;
    hold_scope& operator=(const hold_scope&) = delete;
    /// Names the next step taken while held (stream_hold::note); nothing without a hold.
    void note(const char* step, std::size_t index = stream_hold::no_index) noexcept {
      if (m_hold != nullptr) m_hold->note(step, index);
    }
    /// False when the watchdog had to release the stream.
    bool release() noexcept {
      if (m_hold == nullptr) return true;
      const bool in_time = m_hold->release();
      m_hold = nullptr;
      return in_time;
    }

   private:
    stream_hold* m_hold;
  };

  // Warm-up, never behind a hold: returns the fastest single-launch event time seen (an
  // upper bound of the launch's GPU time, since launch latency may be inside it).
  template <class Launch>
  double warm_up(Launch& launch, const measure_options& options, measurement& record) {
    const auto start = clock::now();
    double fastest_s = std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    while (n < options.warmup_launches || seconds_since(start) < options.warmup_time_s) {
      m_start.record(stream());
      launch(stream());
      check_launch("warm-up", n);
      m_stop.record(stream());
      wait(m_stop, "the warm-up");
      fastest_s = std::min(fastest_s, elapsed_s(m_start, m_stop));
      ++n;
    }
    record.warmup_launches = n;
    record.warmup_wall_s = seconds_since(start);
    return n > 0 ? fastest_s : 0.0;
  }

  // Back-to-back launches for `duration_s` of wall time, waiting on an event every ~10 ms of
  // GPU time so the queue stays short and the time budget is honoured; returns the wall time.
  template <class Launch>
  double settle(Launch& launch, double launch_estimate_s, double duration_s, const measure_options& options,
                const char* phase) {
    const auto start = clock::now();
    const double per_wait = launch_estimate_s > 0 ? std::ceil(0.01 / launch_estimate_s) : 1.0;
    const auto launches_per_wait =
        static_cast<std::size_t>(std::clamp(per_wait, 1.0, static_cast<double>(std::max<std::size_t>(options.max_batch, 1))));
    std::size_t n = 0;
    while (seconds_since(start) < duration_s) {
      for (std::size_t i = 0; i < launches_per_wait; ++i, ++n) {
        launch(stream());
        check_launch(phase, n);
      }
      m_stop.record(stream());
      wait(m_stop, phase);
    }
    return seconds_since(start);
  }

  static std::size_t choose_batch(double launch_estimate_s, const measure_options& options) {
    if (options.batch > 0) return options.batch;
    if (!(launch_estimate_s > 0.0) || !std::isfinite(launch_estimate_s)) return options.max_batch;
    const double wanted = std::ceil(options.min_sample_time_s / launch_estimate_s);
    return static_cast<std::size_t>(std::clamp(wanted, 1.0, static_cast<double>(options.max_batch)));
  }

  // The device's power monitor, created on first use; nullptr (and a warning) without NVML.
  power_monitor* power_monitor_for(const measure_options& options, measurement& record) {
    if (!m_power && m_power_error.empty()) {
      try {
        m_power = std::make_unique<power_monitor>(m_device, options.power_interval_s);
      } catch (const error& e) {
        m_power_error = std::string(e.what()) + "; measured without power";
      }
    }
    if (!m_power) record.warnings.push_back(m_power_error);
    return m_power.get();
  }

  // Returns whether the stream can be held, creating the hold on first use and probing it once.
  bool hold_available(measurement& record) {
    if (!m_hold_error.empty()) {
      record.warnings.push_back(m_hold_error);
      return false;
    }
    if (m_hold) return true;
    try {
      auto hold = std::make_unique<stream_hold>();
      hold->hold(stream(), 1.0);
      hold->release();
      m_stream.synchronize();
      m_hold = std::move(hold);
      return true;
    } catch (const unsupported& e) {
      m_hold_error = std::string(e.what()) + "; measuring without a hold, so launch latency may be inside the window";
      record.warnings.push_back(m_hold_error);
      return false;
    }
  }

  // The measurement's time budget (measure_options::timeout_s) starts now.
  void start_budget(const measure_options& options) {
    m_timeout_s = options.timeout_s;
    m_deadline.reset();
    if (options.timeout_s > 0) {
      m_deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(options.timeout_s));
    }
  }

  // Idles options.cooldown_s (within the budget) once the device has finished earlier work.
  void cool_down(const measure_options& options, measurement& record) {
    if (options.cooldown_s <= 0) return;
    const nvtx_range cool_down_range("gpucmp cool-down");
    GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());  // idle means idle: earlier work has finished
    const double idle_s = m_deadline ? std::min(options.cooldown_s, options.timeout_s) : options.cooldown_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
    record.cooldown_s = idle_s;
    check_deadline("the cool-down");
  }

  // The record's summaries and what a reader must know next to them: throttling and a power
  // sampler that stopped early, noise above its target.
  static void finish(const measure_options& options, measurement& record) {
    if (record.power) {
      if (record.power->throttled()) record.warnings.push_back(record.power->throttle_note());
      if (!record.power->sampling_error.empty()) {
        record.warnings.push_back("power sampling stopped early: " + record.power->sampling_error);
      }
    }
    record.gpu = summarize(record.gpu_s);
    record.wall = summarize(record.wall_s);
    record.noise_target_met = record.gpu.relative_noise <= options.target_noise;
    if (!record.noise_target_met) {
      char text[160];
      std::snprintf(text, sizeof text, "noise %.2f%% above the %.2f%% target (stopped: %s)",
                    100.0 * record.gpu.relative_noise, 100.0 * options.target_noise, to_string(record.stopped_by));
      record.warnings.emplace_back(text);
    }
  }

  template <class Launch>
  void run(Launch& launch, mode m, const measure_options& options, measurement& record) {
    options.validate();
    const nvtx_range measure_range("gpucmp " + std::string(to_string(m)) + (options.name.empty() ? "" : ": " + options.name));
    device_guard on_device(m_device.ordinal);
    cudaGetLastError();  // an earlier non-sticky error is not the callable's fault
    GPUCMP_CUDA_CHECK(cudaPeekAtLastError());  // a sticky one makes measuring pointless
    record.timing_mode = m;
    record.target_noise = options.target_noise;
    const cudaStream_t s = stream();
    start_budget(options);

    cool_down(options, record);
    // What sampling needs is made before the warm-up, whose launches (each waited for) pay
    // what follows an allocation: under compute-sanitizer's initcheck, a launch behind a held
    // stream waited for the hold's watchdog when a buffer had been allocated just before the
    // hold, and not when a kernel had run and been waited for in between
    // (scripts/reliability/hold-probe.sh).
    if (m == mode::cold) {
      if (!m_flusher) m_flusher = std::make_unique<l2_flusher>(m_device.l2_bytes);
      record.l2_flush_bytes = m_flusher->bytes();
    }
    const bool hold = options.hold && hold_available(record);
    record.stream_held = hold;
    double launch_estimate_s = 0;
    {
      const nvtx_range warm_up_range("gpucmp warm-up");
      launch_estimate_s = warm_up(launch, options, record);
    }
    record.batch = m == mode::cold ? 1 : choose_batch(launch_estimate_s, options);

    graph_exec replay;
    if (m == mode::graph) {
      graph captured = capture_graph(m_capture_stream.get(), [&](cudaStream_t capture) {
        for (std::size_t i = 0; i < record.batch; ++i) {
          launch(capture);
          check_launch("graph capture", i);
        }
      });
      replay = graph_exec(captured.get());
      replay.upload(s);
      replay.launch(s);  // first replay pays one-time costs; not timed
      m_stop.record(s);
      wait(m_stop, "the first graph replay");
    }
    // Power: the sampling window is stretched to the power window and observed by NVML.
    measure_options sampling = options;
    power_monitor* monitor = options.power ? power_monitor_for(options, record) : nullptr;
    struct cancel_on_error {  // a failed measurement must not leave the sampler running
      power_monitor* monitor;
      ~cancel_on_error() {
        if (monitor != nullptr) monitor->cancel();
      }
    } cancel{monitor};
    if (options.settle_s > 0) {
      const nvtx_range settle_range("gpucmp settle");
      record.settle_s = settle(launch, launch_estimate_s, options.settle_s, options, "the settle");
    }
    if (monitor != nullptr) {
      if (options.power_settle_s > 0) {
        const nvtx_range settle_range("gpucmp power settle");
        record.power_settle_s = settle(launch, launch_estimate_s, options.power_settle_s, options, "the power settle");
      }
      sampling.min_gpu_time_s = std::max(sampling.min_gpu_time_s, options.power_window_s);
      if (sampling.window_s > 0) sampling.window_s = std::max(sampling.window_s, options.power_window_s);
      monitor->start();
    }
    record.window_s = sampling.window_s;
    if (m == mode::kernel) {
      sample_kernels(launch, sampling, record, hold);
    } else {
      sample_events(launch, m, sampling, record, hold, replay);
    }
    if (monitor != nullptr) {
      cancel.monitor = nullptr;
      record.power = monitor->stop();
    }
    finish(options, record);
  }

  // Host-paced rounds (try_measure_rounds): the same steps as run() without batch or graph.
  template <class Round>
  void run_rounds(Round& round, const measure_options& options, bool hold_rounds, measurement& record) {
    options.validate();
    const nvtx_range measure_range("gpucmp rounds" + (options.name.empty() ? std::string() : ": " + options.name));
    device_guard on_device(m_device.ordinal);
    cudaGetLastError();
    GPUCMP_CUDA_CHECK(cudaPeekAtLastError());
    record.target_noise = options.target_noise;
    start_budget(options);
    cool_down(options, record);
    const bool hold = hold_rounds && options.hold && hold_available(record);
    record.stream_held = hold;
    auto one_round = [&](const char* phase) {
      if (hold) m_hold->hold(stream(), options.hold_timeout_s);
      round_hold h(hold ? m_hold.get() : nullptr);
      const round_result r = round(stream(), h);
      h.release();
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream()));
      check_deadline(phase);
      return r;
    };
    {
      const nvtx_range warm_up_range("gpucmp warm-up");
      const auto start = clock::now();
      do {
        one_round("the warm-up");
        ++record.warmup_launches;
      } while (seconds_since(start) < options.warmup_time_s);
      record.warmup_wall_s = seconds_since(start);
    }
    measure_options sampling = options;
    power_monitor* monitor = options.power ? power_monitor_for(options, record) : nullptr;
    struct cancel_on_error {
      power_monitor* monitor;
      ~cancel_on_error() {
        if (monitor != nullptr) monitor->cancel();
      }
    } cancel{monitor};
    if (monitor != nullptr) {
      sampling.min_gpu_time_s = std::max(sampling.min_gpu_time_s, options.power_window_s);
      if (sampling.window_s > 0) sampling.window_s = std::max(sampling.window_s, options.power_window_s);
      monitor->start();
    }
    record.window_s = sampling.window_s;
    {
      const nvtx_range sampling_range("gpucmp sampling");
      stopping_rule rule(sampling);
      const auto loop_start = clock::now();
      for (;;) {
        const auto round_start = clock::now();
        const round_result r = one_round("sampling");
        record.gpu_s.push_back(r.sample_s);
        record.wall_s.push_back(seconds_since(round_start));
        ++record.launches;
        rule.add(r.sample_s, r.gpu_s);
        if (auto reason = rule.check(seconds_since(loop_start))) {
          record.stopped_by = *reason;
          break;
        }
      }
      record.sampling_wall_s = seconds_since(loop_start);
    }
    if (monitor != nullptr) {
      cancel.monitor = nullptr;
      record.power = monitor->stop();
    }
    finish(options, record);
  }

  // Cold, hot and graph modes: one event pair around each sample's batch.
  template <class Launch>
  void sample_events(Launch& launch, mode m, const measure_options& options, measurement& record, bool hold,
                     graph_exec& replay) {
    const cudaStream_t s = stream();
    const nvtx_range sampling_range("gpucmp sampling");
    stopping_rule rule(options);
    const auto loop_start = clock::now();
    for (;;) {
      const auto sample_start = clock::now();
      bool released_in_time = true;
      {
        hold_scope held(hold ? m_hold.get() : nullptr, s, options.hold_timeout_s);
        if (m == mode::cold) {
          held.note("the L2 flush");
          m_flusher->enqueue(s);
        }
        held.note("the start event");
        m_start.record(s);
        if (m == mode::graph) {
          held.note("the graph replay");
          replay.launch(s);
        } else {
          for (std::size_t i = 0; i < record.batch; ++i) {
            held.note("launch", record.launches + i);
            launch(s);
            check_launch(to_string(m), record.launches + i);
          }
        }
        held.note("the stop event");
        m_stop.record(s);
        released_in_time = held.release();
      }
      wait(m_stop, "sampling");
      if (!released_in_time) throw_hold_timeout(m, options, record.batch);
      const double batch_gpu_s = elapsed_s(m_start, m_stop);
      const double batch_wall_s = seconds_since(sample_start);
      const double n = static_cast<double>(record.batch);
      record.gpu_s.push_back(batch_gpu_s / n);
      record.wall_s.push_back(batch_wall_s / n);
      record.launches += record.batch;
      rule.add(batch_gpu_s / n, batch_gpu_s);
      if (auto reason = rule.check(seconds_since(loop_start))) {
        record.stopped_by = *reason;
        break;
      }
      check_deadline("sampling");
    }
    record.sampling_wall_s = seconds_since(loop_start);
  }

  // Kernel mode: each launch gets its own sample id in the activity tracer; a batch of
  // launches is queued behind the hold (so gaps between a callable's kernels are GPU gaps,
  // not host launch latency), then the records are collected and attributed. The event time
  // of each batch is kept as the traced event time, which shows the tracing overhead.
  template <class Launch>
  void sample_kernels(Launch& launch, const measure_options& options, measurement& record, bool hold) {
    if (!m_tracer) m_tracer = make_activity_tracer();
    m_tracer->start();
    struct stop_tracing {
      activity_tracer* tracer;
      ~stop_tracing() { tracer->stop(); }
    } stop_on_exit{m_tracer.get()};

    const cudaStream_t s = stream();
    const nvtx_range sampling_range("gpucmp sampling");
    kernel_profile profile;
    breakdown_accumulator kernels;
    stopping_rule rule(options);
    const auto loop_start = clock::now();
    for (;;) {
      const std::uint64_t first_id = record.launches;
      const auto sample_start = clock::now();
      bool released_in_time = true;
      {
        hold_scope held(hold ? m_hold.get() : nullptr, s, options.hold_timeout_s);
        held.note("the start event");
        m_start.record(s);
        for (std::size_t i = 0; i < record.batch; ++i) {
          held.note("launch", first_id + i);
          m_tracer->begin_sample(first_id + i);
          launch(s);
          m_tracer->end_sample();
          check_launch("kernel", first_id + i);
        }
        held.note("the stop event");
        m_stop.record(s);
        released_in_time = held.release();
      }
      wait(m_stop, "kernel-mode sampling");
      if (!released_in_time) throw_hold_timeout(mode::kernel, options, record.batch);
      const double n = static_cast<double>(record.batch);
      const double wall_per_launch_s = seconds_since(sample_start) / n;
      profile.traced_event_s.push_back(elapsed_s(m_start, m_stop) / n);

      std::map<std::uint64_t, std::vector<activity_record>> by_launch;
      for (auto& r : m_tracer->collect()) {
        if (r.sample < first_id || r.sample >= first_id + record.batch) continue;  // not from this batch
        by_launch[r.sample].push_back(std::move(r));
      }
      for (const auto& [sample, records] : by_launch) kernels.add_launch(records);
      // Every launch of the batch becomes a sample (the breakdown already holds all of
      // them); the stopping rule is consulted once per batch.
      for (std::size_t i = 0; i < record.batch; ++i) {
        auto found = by_launch.find(first_id + i);
        const activity_times t = found == by_launch.end() ? activity_times{} : times_of(std::move(found->second));
        if (t.activities == 0) ++profile.launches_without_activity;
        record.gpu_s.push_back(t.busy_s);
        record.wall_s.push_back(wall_per_launch_s);
        profile.span_s.push_back(t.span_s);
        profile.idle_s.push_back(t.idle_s);
        ++record.launches;
        rule.add(t.busy_s, t.busy_s);
      }
      if (auto reason = rule.check(seconds_since(loop_start))) {
        record.stopped_by = *reason;
        break;
      }
      check_deadline("kernel-mode sampling");
    }
    record.sampling_wall_s = seconds_since(loop_start);
    if (profile.launches_without_activity == record.launches) {
      throw error("kernel mode: the measured callable enqueued no kernel, memcpy or memset that the tracer saw");
    }
    profile.span = summarize(profile.span_s);
    profile.idle = summarize(profile.idle_s);
    profile.traced_event = summarize(profile.traced_event_s);
    profile.kernels = kernels.result(record.launches);
    profile.dropped_records = m_tracer->dropped_records();
    if (profile.dropped_records > 0) {
      record.warnings.push_back(std::to_string(profile.dropped_records) + " activity records were dropped");
    }
    if (profile.launches_without_activity > 0) {
      record.warnings.push_back(std::to_string(profile.launches_without_activity) + " launches had no traced activity");
    }
    record.kernels = std::move(profile);
  }

  [[noreturn]] void throw_hold_timeout(mode m, const measure_options& options, std::size_t batch) const {
    const std::string where = m_hold ? m_hold->blocked_in() : std::string();
    char text[640];
    std::snprintf(text, sizeof text,
                  "stream hold timed out after %g s in %s mode (batch %zu): the measured code blocked while its "
                  "stream was held, which would have deadlocked%s%s. It probably synchronizes internally "
                  "(cudaStreamSynchronize, cudaDeviceSynchronize, cudaMemcpy, cudaMalloc/cudaFree) or queues more "
                  "work than the launch queue holds. Set measure_options::hold = false for such code, or lower max_batch.",
                  options.hold_timeout_s, to_string(m), batch, where.empty() ? "" : "; the host was in ",
                  where.c_str());
    throw hold_timeout(text);
  }

  device_info m_device;
  gpucmp::stream m_stream;
  gpucmp::stream m_capture_stream;
  event m_start;
  event m_stop;
  std::unique_ptr<l2_flusher> m_flusher;
  std::unique_ptr<stream_hold> m_hold;
  std::string m_hold_error;
  std::unique_ptr<power_monitor> m_power;
  std::string m_power_error;
  std::unique_ptr<activity_tracer> m_tracer;
  std::optional<clock::time_point> m_deadline;  ///< end of the running measurement's budget, if it has one
  double m_timeout_s = 0;                       ///< that budget, for the message
};

}  // namespace gpucmp
