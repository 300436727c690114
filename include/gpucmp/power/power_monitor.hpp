// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Power, energy, clocks and throttling around a measurement window. A background thread
// samples NVML every few milliseconds (power, SM and memory clocks, temperature, clock-event
// reasons, the energy counter); the window's energy comes from the driver's total-energy
// counter when it advanced, else from the sampled power integrated over time. Samples taken
// while the GPU was slowed for power or heat are counted and named.
#pragma once

#include <gpucmp/power/clock_events.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/power/nvml.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpucmp {

/// One NVML reading.
struct power_sample {
  double t_s = 0;                ///< seconds since the window started
  double power_w = NAN;          ///< power draw (NaN when not reported)
  double energy_j = NAN;         ///< total-energy counter (NaN when not reported)
  unsigned sm_clock_mhz = 0;     ///< SM clock
  unsigned memory_clock_mhz = 0; ///< memory clock
  unsigned temperature_c = 0;    ///< GPU temperature
  std::uint64_t clock_events = 0;///< clock-event reason bits
};

/// Power and energy of one measurement window.
struct power_record {
  double window_s = 0;            ///< wall time of the window
  double energy_j = 0;            ///< energy used by the GPU in the window
  std::string energy_source;      ///< "energy counter" or "sampled power x time"
  double average_w = 0;           ///< average power: between the energy counter's updates (counter_average_power), else energy / window
  double peak_w = 0;              ///< highest power over any 100 ms of the window (see window_peak_power)
  double power_limit_w = 0;       ///< enforced power limit (0 if unknown)
  unsigned sm_clock_start_mhz = 0, sm_clock_end_mhz = 0;          ///< SM clock at start and end
  unsigned memory_clock_start_mhz = 0, memory_clock_end_mhz = 0;  ///< memory clock at start and end
  unsigned temperature_start_c = 0, temperature_end_c = 0, temperature_max_c = 0;  ///< temperatures
  std::size_t samples = 0;            ///< readings taken
  std::size_t throttled_samples = 0;  ///< readings taken while slowed for power or heat
  std::vector<std::string> throttle_reasons;  ///< every throttling reason seen
  std::vector<power_sample> trace;    ///< every reading, for plots and checks
  std::string sampling_error;         ///< why sampling stopped before the window ended ("" when it did not)

  /// True when any reading was taken while the GPU was slowed for power or heat.
  bool throttled() const noexcept { return throttled_samples > 0; }
  /// "throttled in 41 of 52 power samples (sw_power_cap)" or "".
  std::string throttle_note() const {
    if (!throttled()) return "";
    std::string reasons;
    for (const auto& r : throttle_reasons) reasons += (reasons.empty() ? "" : ", ") + r;
    return "throttled in " + std::to_string(throttled_samples) + " of " + std::to_string(samples) + " power samples (" +
           reasons + ")";
  }
};

/// Average power of a window from the energy counter, over the time between the counter's
/// own updates: the counter has millijoule resolution but moves in steps tens of
/// milliseconds apart, so its difference between the window's first and last readings
/// covers the time between two steps, not the window. Dividing it by the window reads up to
/// one step interval too high or low (docs/power-and-serving.md, "Why the average is taken
/// between the counter's steps").
/// Here the energy between the first and last readings at which the counter had just moved
/// is divided by the time between those readings. NaN when the counter moved fewer than
/// twice.
inline double counter_average_power(const std::vector<power_sample>& trace) {
  std::size_t first = 0, last = 0;
  bool seen = false;
  for (std::size_t i = 1; i < trace.size(); ++i) {
    if (!(std::isfinite(trace[i].energy_j) && std::isfinite(trace[i - 1].energy_j))) continue;
    if (trace[i].energy_j == trace[i - 1].energy_j) continue;
    if (!seen) first = i;
    last = i;
    seen = true;
  }
  if (!seen || last == first || !(trace[last].t_s > trace[first].t_s)) return NAN;
  return (trace[last].energy_j - trace[first].energy_j) / (trace[last].t_s - trace[first].t_s);
}

/// Energy of a window from its readings: the counter's difference when it advanced (it has
/// millijoule resolution but updates every few tens of milliseconds), else the trapezoid
/// integral of the sampled power. Returns {energy, source}; {0, ""} when neither exists.
inline std::pair<double, std::string> window_energy(const std::vector<power_sample>& trace) {
  if (trace.size() >= 2) {
    const double first = trace.front().energy_j, last = trace.back().energy_j;
    if (std::isfinite(first) && std::isfinite(last) && last > first) return {last - first, "energy counter"};
    double integral = 0;
    bool any = false;
    for (std::size_t i = 1; i < trace.size(); ++i) {
      const double a = trace[i - 1].power_w, b = trace[i].power_w;
      if (std::isfinite(a) && std::isfinite(b)) {
        integral += 0.5 * (a + b) * (trace[i].t_s - trace[i - 1].t_s);
        any = true;
      }
    }
    if (any) return {integral, "sampled power x time"};
  }
  return {0.0, ""};
}

/// The highest average power over any stretch of at least `span_s` in the window. From the
/// energy counter when it advances: NVML's power reading is itself an average over about a
/// second on Ampere and later, so under a load that starts with the window its maximum lags
/// and reads below the window's average. The counter moves in steps (tens of milliseconds
/// apart), so stretches run between readings where it had just moved; a stretch measured
/// from arbitrary readings could hold one step more than its length. Without the counter,
/// the highest power reading.
inline double window_peak_power(const std::vector<power_sample>& trace, double span_s = 0.1) {
  std::vector<std::size_t> steps;  // readings where the counter had just moved
  for (std::size_t i = 1; i < trace.size(); ++i) {
    if (std::isfinite(trace[i].energy_j) && std::isfinite(trace[i - 1].energy_j) &&
        trace[i].energy_j != trace[i - 1].energy_j) {
      steps.push_back(i);
    }
  }
  double peak = 0;
  for (std::size_t a = 0, b = 0; a < steps.size(); ++a) {
    if (b < a) b = a;
    while (b < steps.size() && trace[steps[b]].t_s - trace[steps[a]].t_s < span_s) ++b;
    if (b == steps.size()) break;
    const power_sample& from = trace[steps[a]];
    const power_sample& to = trace[steps[b]];
    peak = std::max(peak, (to.energy_j - from.energy_j) / (to.t_s - from.t_s));
  }
  if (peak > 0) return peak;
  for (const auto& s : trace) {
    if (std::isfinite(s.power_w)) peak = std::max(peak, s.power_w);
  }
  return peak;
}

namespace detail {

/// The sampling thread's loop: every `interval_s` until `running` turns false, appends
/// `read()` to `trace` under `mutex`. An exception ends the loop, not the process: its message
/// goes to `error` (under `mutex`), and the readings taken so far stay.
inline void sample_until_stopped(const std::atomic<bool>& running, double interval_s,
                                 const std::function<power_sample()>& read, std::vector<power_sample>& trace,
                                 std::mutex& mutex, std::string& error) noexcept {
  try {
    while (running.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
      const power_sample s = read();
      std::lock_guard<std::mutex> lock(mutex);
      trace.push_back(s);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex);
    error = e.what();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex);
    error = "an exception that is not a std::exception";
  }
}

}  // namespace detail

/// Samples one GPU in a background thread between start() and stop(). Construct it once per
/// device; it throws unsupported (NVML not available, device unknown) at construction only.
class power_monitor {
 public:
  /// Monitors `device`, reading every `interval_s`.
  explicit power_monitor(const device_info& device, double interval_s = 0.005)
      : m_device(device), m_interval_s(interval_s) {
    if (!(interval_s > 0)) throw invalid_argument("power_monitor: interval must be > 0");
  }
  ~power_monitor() { stop_thread(); }
  power_monitor(const power_monitor&) = delete;
  power_monitor& operator=(const power_monitor&) = delete;

  /// Starts a window (takes the first reading before returning).
  void start() {
    stop_thread();
    m_trace.clear();
    m_sampling_error.clear();
    m_start = clock::now();
    m_trace.push_back(read());
    m_running = true;
    m_thread = std::thread([this] {
      detail::sample_until_stopped(m_running, m_interval_s, [this] { return read(); }, m_trace, m_mutex, m_sampling_error);
    });
  }

  /// Ends the window (takes a last reading) and summarises it.
  power_record stop() {
    stop_thread();
    m_trace.push_back(read());
    power_record r;
    r.trace = m_trace;
    r.sampling_error = m_sampling_error;
    r.window_s = r.trace.back().t_s - r.trace.front().t_s;
    const auto [energy, source] = window_energy(r.trace);
    r.energy_source = source;
    // The average between the counter's own updates (see counter_average_power), and the
    // window's energy as that average over the window, so energy = average x window holds.
    const double between_steps_w = counter_average_power(r.trace);
    r.average_w = std::isfinite(between_steps_w) ? between_steps_w : (r.window_s > 0 ? energy / r.window_s : 0.0);
    r.energy_j = std::isfinite(between_steps_w) ? between_steps_w * r.window_s : energy;
    r.power_limit_w = m_device.power_limit_w().value_or(0.0);
    r.samples = r.trace.size();
    std::uint64_t seen = 0;
    r.peak_w = window_peak_power(r.trace);
    for (const auto& s : r.trace) {
      r.temperature_max_c = std::max(r.temperature_max_c, s.temperature_c);
      if (is_throttled(s.clock_events)) {
        ++r.throttled_samples;
        seen |= s.clock_events;
      }
    }
    for (const auto& name : decode_clock_events(seen)) {
      for (const auto& reason : clock_event_reasons) {
        if (name == reason.name && reason.throttles) r.throttle_reasons.push_back(name);
      }
    }
    r.sm_clock_start_mhz = r.trace.front().sm_clock_mhz;
    r.sm_clock_end_mhz = r.trace.back().sm_clock_mhz;
    r.memory_clock_start_mhz = r.trace.front().memory_clock_mhz;
    r.memory_clock_end_mhz = r.trace.back().memory_clock_mhz;
    r.temperature_start_c = r.trace.front().temperature_c;
    r.temperature_end_c = r.trace.back().temperature_c;
    return r;
  }

  /// Ends a window without a record (a measurement that failed); never throws.
  void cancel() noexcept { stop_thread(); }

  /// The NVML device (for context queries).
  const nvml_device& device() const noexcept { return m_device; }

 private:
  using clock = std::chrono::steady_clock;

  power_sample read() const {
    power_sample s;
    s.t_s = std::chrono::duration<double>(clock::now() - m_start).count();
    s.power_w = m_device.power_w().value_or(NAN);
    s.energy_j = m_device.energy_j().value_or(NAN);
    s.sm_clock_mhz = m_device.sm_clock_mhz().value_or(0);
    s.memory_clock_mhz = m_device.memory_clock_mhz().value_or(0);
    s.temperature_c = m_device.temperature_c().value_or(0);
    s.clock_events = m_device.clock_event_reasons().value_or(0);
    return s;
  }

  void stop_thread() noexcept {
    m_running = false;
    if (m_thread.joinable()) m_thread.join();
  }

  nvml_device m_device;
  double m_interval_s;
  clock::time_point m_start;
  std::vector<power_sample> m_trace;
  std::string m_sampling_error;  // set by the sampling thread when it stopped early
  std::mutex m_mutex;
  std::atomic<bool> m_running{false};
  std::thread m_thread;
};

}  // namespace gpucmp
