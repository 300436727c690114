// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How NVML's energy counter moves: reads it every millisecond while idle and under 8192^3
// FP16 GEMMs, and reports the time between its steps, its steps against the sampled power,
// and what short power windows read when the counter's difference is divided by the window
// (the old average) or by the time between the counter's own updates (gpucmp's average).
//   power_counter_probe OUT.json
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/power/power_monitor.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {
// Windows of `span_s` slid across the trace in 10 ms steps: the highest reading of each average.
void short_windows(const std::vector<gpucmp::power_sample>& trace, double from_s, double span_s, double& naive_max,
                   double& between_steps_max) {
  naive_max = between_steps_max = 0;
  for (double t0 = from_s; t0 + span_s <= trace.back().t_s; t0 += 0.01) {
    std::vector<gpucmp::power_sample> w;
    for (const auto& s : trace) {
      if (s.t_s >= t0 && s.t_s <= t0 + span_s) w.push_back(s);
    }
    if (w.size() < 3) continue;
    const double naive = (w.back().energy_j - w.front().energy_j) / (w.back().t_s - w.front().t_s);
    naive_max = std::max(naive_max, naive);
    const double between = gpucmp::counter_average_power(w);
    if (std::isfinite(between)) between_steps_max = std::max(between_steps_max, between);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: power_counter_probe OUT.json\n");
    return 2;
  }
  try {
    const gpucmp::device_info device = gpucmp::query_current_device();
    gpucmp::power_monitor monitor(device, 0.001);
    gpucmp::stream s;
    gpucmp::gemm_problem p;
    p.m = p.n = p.k = 8192;
    p.dtype = gpucmp::numerics::fp16;
    gpucmp::gemm_options o;
    o.choice = gpucmp::algorithm_choice::heuristic;
    gpucmp::gemm g(p, o, s.get());
    if (!g.verify(s.get()).passed()) throw gpucmp::error("the GEMM did not verify");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    monitor.start();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 10; ++i) g(s.get());
      s.synchronize();
    }
    const gpucmp::power_record r = monitor.stop();
    // Time between the counter's steps, and each step's power (its energy over that time).
    std::vector<double> intervals, step_w, sampled_w;
    double last_t = -1, last_e = 0;
    for (std::size_t i = 1; i < r.trace.size(); ++i) {
      if (r.trace[i].energy_j == r.trace[i - 1].energy_j) continue;
      if (last_t >= 0 && r.trace[i].t_s > 1.0) {
        intervals.push_back(r.trace[i].t_s - last_t);
        step_w.push_back((r.trace[i].energy_j - last_e) / (r.trace[i].t_s - last_t));
        sampled_w.push_back(r.trace[i].power_w);
      }
      last_t = r.trace[i].t_s;
      last_e = r.trace[i].energy_j;
    }
    const gpucmp::summary iv = gpucmp::summarize(intervals), sw = gpucmp::summarize(step_w),
                          pw = gpucmp::summarize(sampled_w);
    double naive_02 = 0, between_02 = 0, naive_1 = 0, between_1 = 0;
    short_windows(r.trace, 1.0, 0.2, naive_02, between_02);
    short_windows(r.trace, 1.0, 1.0, naive_1, between_1);
    std::FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) throw gpucmp::error(std::string("cannot write ") + argv[1]);
    std::fprintf(f,
                 "{\"gpu\": \"%s\", \"power_limit_w\": %.1f, \"readings\": %zu, \"reading_interval_s\": 0.001,\n"
                 " \"counter_step_interval_s\": {\"min\": %.4f, \"median\": %.4f, \"max\": %.4f, \"count\": %zu},\n"
                 " \"step_power_w\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f},\n"
                 " \"sampled_power_w\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f},\n"
                 " \"window_0.2s_max_w\": {\"counter_over_window\": %.1f, \"between_counter_steps\": %.1f},\n"
                 " \"window_1s_max_w\": {\"counter_over_window\": %.1f, \"between_counter_steps\": %.1f},\n"
                 " \"whole_4s\": {\"average_w\": %.1f, \"peak_100ms_w\": %.1f}}\n",
                 device.name.c_str(), r.power_limit_w, r.trace.size(), iv.min, iv.median, iv.max, iv.count, sw.median,
                 sw.min, sw.max, pw.median, pw.min, pw.max, naive_02, between_02, naive_1, between_1, r.average_w, r.peak_w);
    std::fclose(f);
    std::printf("counter steps every %.1f ms (median; %.1f to %.1f), limit %.0f W; 0.2 s windows: counter/window up to "
                "%.0f W, between steps up to %.0f W; 1 s windows: %.0f / %.0f W\n",
                iv.median * 1e3, iv.min * 1e3, iv.max * 1e3, r.power_limit_w, naive_02, between_02, naive_1, between_1);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "power_counter_probe: %s\n", e.what());
    return 1;
  }
}
