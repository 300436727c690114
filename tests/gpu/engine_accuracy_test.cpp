// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Accuracy against a kernel of known duration (spinning on %globaltimer). Bounds from the
// foundation issue: graph mode within +6 % / +1.5 % / +0.5 % at 10 us / 100 us / 1 ms, hot
// mode within +15 % / +2 % / +0.5 %, and never below the nominal time.
//
// Batched per-launch times include the stream's kernel-to-kernel gap, a property of the GPU,
// driver and clock state: 1.29 us back to back and ~0.5 us inside a graph in the reference
// measurement these bounds were derived from, but up to 1.63 us and 0.69 us on an H200 of
// this project on 2026-11-30, which alone exceeds +15 % hot and +6 % graph at 10 us. So at
// 10 us each mode must meet the bound or, failing that, add nothing beyond the gap
// measured in the same run to the kernel's own duration (kernel mode, when built with CUPTI).
#include "catch.hpp"
#include "test_kernels.hpp"

#include <gpucmp/measure/engine.hpp>
#if GPUCMP_TEST_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>
#endif

#include <algorithm>
#include <vector>

namespace {
struct accuracy_case {
  double nominal_s;
  double graph_bound;  // allowed relative excess of the median
  double hot_bound;
};

// One event pair around one launch: what the naive harnesses measure.
double naive_median_s(gpucmp::engine& eng, double nominal_s) {
  gpucmp::event start, stop;
  std::vector<double> samples;
  for (int i = 0; i < 30; ++i) {
    start.record(eng.stream());
    gpucmp_test::launch_spin(eng.stream(), nominal_s);
    stop.record(eng.stream());
    stop.synchronize();
    samples.push_back(gpucmp::elapsed_s(start, stop));
  }
  return gpucmp::summarize(samples).median;
}
}  // namespace

TEST_CASE("spin kernels are measured within the issue's bounds in graph and hot mode", "[gpu][engine][accuracy][timing]") {
  gpucmp::engine eng;
  const accuracy_case cases[] = {{100e-6, 0.015, 0.02}, {1e-3, 0.005, 0.005}};
  for (const auto& c : cases) {
    auto spin = [&](cudaStream_t s) { gpucmp_test::launch_spin(s, c.nominal_s); };
    const auto graph = eng.measure(spin, gpucmp::mode::graph);
    const auto hot = eng.measure(spin, gpucmp::mode::hot);
    INFO("nominal " << c.nominal_s * 1e6 << " us: graph median " << graph.gpu.median * 1e6 << " (min "
                    << graph.gpu.min * 1e6 << ", batch " << graph.batch << "), hot median " << hot.gpu.median * 1e6
                    << " (min " << hot.gpu.min * 1e6 << ", batch " << hot.batch << ")");
    CHECK(graph.stream_held);
    CHECK(hot.stream_held);
    CHECK(graph.gpu.min >= c.nominal_s);
    CHECK(hot.gpu.min >= c.nominal_s);
    CHECK(graph.gpu.median <= c.nominal_s * (1 + c.graph_bound));
    CHECK(hot.gpu.median <= c.nominal_s * (1 + c.hot_bound));
  }
}

TEST_CASE("at 10 us graph and hot mode add nothing but the stream's own gap", "[gpu][engine][accuracy][timing][cupti]") {
  gpucmp::engine eng;
  const double nominal = 10e-6;
  auto spin = [&](cudaStream_t s) { gpucmp_test::launch_spin(s, nominal); };
  const auto graph = eng.measure(spin, gpucmp::mode::graph);
  const auto hot = eng.measure(spin, gpucmp::mode::hot);
  const double graph_gap = eng.measure(gpucmp_test::launch_empty, gpucmp::mode::graph).gpu.median;
  const double hot_gap = eng.measure(gpucmp_test::launch_empty, gpucmp::mode::hot).gpu.median;
#if GPUCMP_TEST_KERNEL_MODE
  // The kernel's own duration, from per-kernel timestamps.
  const double kernel = eng.measure(spin, gpucmp::mode::kernel).gpu.median;
#else
  const double kernel = nominal;
#endif
  INFO("graph " << graph.gpu.median * 1e6 << " us, hot " << hot.gpu.median * 1e6 << " us, kernel " << kernel * 1e6
                << " us, empty-kernel gap: graph " << graph_gap * 1e6 << " us, hot " << hot_gap * 1e6 << " us");
  CHECK(graph.gpu.min >= nominal);
  CHECK(hot.gpu.min >= nominal);
  // The bounds (+6 % graph, +15 % hot) or, where the stream's own gap alone exceeds
  // them, the kernel's duration plus that gap; 0.25 us covers the spin kernel's own jitter.
  CHECK(graph.gpu.median <= std::max(nominal * 1.06, kernel + graph_gap + 0.25e-6));
  CHECK(hot.gpu.median <= std::max(nominal * 1.15, kernel + hot_gap + 0.25e-6));
  CHECK(hot_gap < 2e-6);  // a gap beyond this means something other than the stream is in the window
}

TEST_CASE("the naive single-launch reading is biased upward and the engine is not", "[gpu][engine][accuracy][timing]") {
  gpucmp::engine eng;
  const double nominal = 10e-6;
  const double naive = naive_median_s(eng, nominal);
  const auto graph = eng.measure([&](cudaStream_t s) { gpucmp_test::launch_spin(s, nominal); }, gpucmp::mode::graph);
  INFO("naive " << naive * 1e6 << " us, graph " << graph.gpu.median * 1e6 << " us");
  CHECK(naive > graph.gpu.median);
  CHECK(naive >= nominal);
}
