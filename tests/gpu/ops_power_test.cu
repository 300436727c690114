// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Power and energy through NVML under a long verified GEMM: plausible power (above idle, at
// most the power limit), energy from the driver's counter agreeing with the sampled power
// integrated over time, and the engine's power record on a measurement.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/measure/engine.hpp>
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/power/power_monitor.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <chrono>
#include <cmath>
#include <thread>

TEST_CASE("power under a long GEMM lies between idle and the power limit; energy matches power x time",
          "[gpu][power][timing]") {
  if (!gpucmp::nvml_library::instance().available()) FAIL(gpucmp::nvml_library::instance().reason());
  const gpucmp::device_info device = gpucmp::query_current_device();
  gpucmp::power_monitor monitor(device);
  gpucmp::stream s;
  gpucmp::gemm_problem p;
  p.m = p.n = p.k = 8192;
  p.dtype = gpucmp::numerics::fp16;
  gpucmp::gemm_options o;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::gemm g(p, o, s.get());
  gpucmp::choose_algorithm(g);
  REQUIRE(g.verify(s.get()).passed());

  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // let the ~1 s power average settle
  monitor.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const gpucmp::power_record idle = monitor.stop();

  monitor.start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 20; ++i) g(s.get());
    s.synchronize();
  }
  const gpucmp::power_record busy = monitor.stop();
  INFO("idle " << idle.average_w << " W; GEMM " << busy.average_w << " W avg, " << busy.peak_w << " W peak, limit "
               << busy.power_limit_w << " W, " << busy.energy_j << " J over " << busy.window_s << " s ("
               << busy.energy_source << "), SM " << busy.sm_clock_start_mhz << "->" << busy.sm_clock_end_mhz
               << " MHz, " << busy.temperature_max_c << " C; " << busy.throttle_note());
  WARN("idle " << idle.average_w << " W; 8192^3 FP16 GEMMs for 4 s: " << busy.average_w << " W average, "
                << busy.peak_w << " W peak (100 ms), limit " << busy.power_limit_w << " W, " << busy.energy_j << " J ("
                << busy.energy_source << "), SM clock " << busy.sm_clock_start_mhz << " -> " << busy.sm_clock_end_mhz
                << " MHz, max " << busy.temperature_max_c << " C, " << busy.throttle_note());
  REQUIRE(busy.power_limit_w > 0);
  CHECK(idle.average_w > 0);
  CHECK(busy.average_w > 1.5 * idle.average_w);
  CHECK(busy.average_w <= 1.05 * busy.power_limit_w);
  CHECK(busy.peak_w >= busy.average_w);
  // The software power cap is a controller: at the load's onset a 100 ms window overshoots
  // the limit before it pulls the clocks down, by up to 1.245x in 4 runs on the H200
  // (results/h200/reliability/timing_margins.md); a peak taken over spans shorter than the
  // counter's steps read 2.05x, which this bound still catches. The steady part's stretches
  // are held to within 10 % of the limit below.
  CHECK(busy.peak_w <= 1.5 * busy.power_limit_w);
  CHECK(busy.energy_source == "energy counter");
  CHECK(busy.window_s == Approx(4.0).margin(0.3));
  CHECK(busy.sm_clock_end_mhz > 0);
  CHECK(busy.temperature_max_c > 0);
  CHECK(busy.samples > 100);

  // Energy counter vs sampled power x time over the steady part (after the driver's ~1 s
  // power average has caught up with the load): within 10 %.
  std::size_t from = 0;
  while (from < busy.trace.size() && busy.trace[from].t_s < 1.5) ++from;
  REQUIRE(from + 10 < busy.trace.size());
  std::vector<gpucmp::power_sample> steady(busy.trace.begin() + long(from), busy.trace.end());
  const double counter = steady.back().energy_j - steady.front().energy_j;
  double integral = 0;
  for (std::size_t i = 1; i < steady.size(); ++i) {
    integral += 0.5 * (steady[i].power_w + steady[i - 1].power_w) * (steady[i].t_s - steady[i - 1].t_s);
  }
  INFO("steady part: counter " << counter << " J, sampled power x time " << integral << " J");
  CHECK(std::fabs(counter - integral) <= 0.10 * counter);

  // The steady part's peak, measured as peak_w is (counter steps at least 100 ms apart).
  const double steady_peak = gpucmp::window_peak_power(steady);
  INFO("steady part's peak: " << steady_peak << " W over 100 ms stretches");
  CHECK(steady_peak > 0);
  CHECK(steady_peak <= 1.10 * busy.power_limit_w);
}

TEST_CASE("a measurement with power on carries a power record over at least the power window", "[gpu][power]") {
  gpucmp::engine eng(gpucmp::current_device());
  gpucmp::gemm_problem p;
  p.m = p.n = p.k = 4096;
  p.dtype = gpucmp::numerics::bf16;
  gpucmp::gemm g(p, gpucmp_test::paced(gpucmp::gemm_options{}), eng.stream());
  gpucmp::choose_algorithm(g);
  gpucmp::measure_options o;
  o.power = true;
  o.power_window_s = 0.6;
  const gpucmp::measurement m = eng.measure(g, gpucmp::mode::graph, o);
  REQUIRE(m.power.has_value());
  const double gpu_time = m.gpu.mean * double(m.launches);
  CHECK(gpu_time >= 0.6);
  CHECK(m.power->window_s >= 0.6);
  CHECK(m.power->average_w > 0);
  CHECK(m.power->energy_j == Approx(m.power->average_w * m.power->window_s).epsilon(1e-9));
  CHECK(m.power_settle_s >= o.power_settle_s);  // the load ran before the window began
}

// The suite's case: a capped GEMM measured from idle. Without the settle, the window begins
// with the load and includes the power limiter's onset overshoot (H200: 735 W on a 700 W
// card); after power_settle_s of load the average is the sustained draw.
TEST_CASE("a sustained GEMM measured from idle with power on averages at most the power limit + 5 %",
          "[gpu][power][timing]") {
  if (!gpucmp::nvml_library::instance().available()) FAIL(gpucmp::nvml_library::instance().reason());
  gpucmp::engine eng(gpucmp::current_device());
  gpucmp::gemm_problem p;
  p.m = p.n = p.k = 8192;
  p.dtype = gpucmp::numerics::fp16;
  gpucmp::gemm_options go;
  go.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::gemm g(p, go, eng.stream());
  gpucmp::choose_algorithm(g);
  REQUIRE(g.verify(eng.stream()).passed());
  auto from_idle = [&](double settle_s) {
    gpucmp::measure_options o;
    o.power = true;
    o.power_settle_s = settle_s;
    o.cooldown_s = 1.5;  // from idle, as the first benchmark of a suite or one after a light one
    return eng.measure(g, gpucmp::mode::graph, o);
  };
  const gpucmp::measurement onset = from_idle(0.0);
  const gpucmp::measurement settled = from_idle(1.0);
  REQUIRE(onset.power.has_value());
  REQUIRE(settled.power.has_value());
  WARN("8192^3 FP16 GEMM from idle: window at the onset " << onset.power->average_w << " W (SM "
       << onset.power->sm_clock_start_mhz << " -> " << onset.power->sm_clock_end_mhz << " MHz), after "
       << settled.power_settle_s << " s of load " << settled.power->average_w << " W (SM "
       << settled.power->sm_clock_start_mhz << " -> " << settled.power->sm_clock_end_mhz << " MHz), limit "
       << settled.power->power_limit_w << " W");
  REQUIRE(settled.power->power_limit_w > 0);
  CHECK(settled.power_settle_s >= 1.0);
  CHECK(settled.power->average_w <= 1.05 * settled.power->power_limit_w);
  CHECK(settled.power->average_w > 0.5 * settled.power->power_limit_w);  // it was under load
}
