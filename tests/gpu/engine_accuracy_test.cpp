// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Accuracy against a kernel of known duration (spinning on %globaltimer). Bounds from the
// foundation issue: graph mode within +6 % / +1.5 % / +0.5 % at 10 us / 100 us / 1 ms, hot
// mode within +15 % / +2 % / +0.5 % (batched launches include the stream's ~1.3 us
// kernel-to-kernel gap), and never below the nominal time.
#include "catch.hpp"
#include "test_kernels.hpp"

#include <gpucmp/engine.hpp>

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

TEST_CASE("spin kernels are measured within the issue's bounds in graph and hot mode", "[gpu][engine][accuracy]") {
  gpucmp::engine eng;
  const accuracy_case cases[] = {{10e-6, 0.06, 0.15}, {100e-6, 0.015, 0.02}, {1e-3, 0.005, 0.005}};
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

TEST_CASE("the naive single-launch reading is biased upward and the engine is not", "[gpu][engine][accuracy]") {
  gpucmp::engine eng;
  const double nominal = 10e-6;
  const double naive = naive_median_s(eng, nominal);
  const auto graph = eng.measure([&](cudaStream_t s) { gpucmp_test::launch_spin(s, nominal); }, gpucmp::mode::graph);
  INFO("naive " << naive * 1e6 << " us, graph " << graph.gpu.median * 1e6 << " us");
  CHECK(naive > graph.gpu.median);
  CHECK(naive >= nominal);
}
