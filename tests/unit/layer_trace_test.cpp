// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel mode layer by layer (trace_layers) with a fake tracer: each "layer" enqueues fake
// activities with chosen durations, so attribution, medians and shares are checked exactly.
#include "catch.hpp"

#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/models/layer_trace.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Records what the code under test asks of it; "launches" append records to the open sample.
class fake_tracer final : public gpucmp::activity_tracer {
 public:
  void start() override { ++starts; }
  void begin_sample(std::uint64_t id) override {
    CHECK_FALSE(open);  // samples never nest
    open = true;
    current = id;
  }
  void end_sample() override {
    CHECK(open);
    open = false;
  }
  std::vector<gpucmp::activity_record> collect() override {
    ++collects;
    std::vector<gpucmp::activity_record> out;
    out.swap(pending);
    return out;
  }
  std::size_t dropped_records() override { return dropped; }
  void stop() noexcept override { ++stops; }

  // One activity of `ns` nanoseconds, back to back after the previous one, in the open sample
  // (or unattributed when none is open: such records are dropped by a real tracer's collect).
  void launch(const std::string& name, std::uint64_t ns) {
    if (!open) return;
    gpucmp::activity_record r;
    r.name = name;
    r.start_ns = clock_ns;
    r.end_ns = clock_ns + ns;
    r.sample = current;
    clock_ns += ns + 100;  // a 100 ns gap after each activity
    pending.push_back(r);
  }

  bool open = false;
  std::uint64_t current = 0;
  std::uint64_t clock_ns = 1000;
  std::vector<gpucmp::activity_record> pending;
  int starts = 0, stops = 0, collects = 0;
  std::size_t dropped = 0;
};

const std::vector<std::string> names = {"conv1", "pool", "fc"};

}  // namespace

TEST_CASE("trace_layers attributes every activity to the layer that enqueued it", "[layer_trace]") {
  fake_tracer tracer;
  int pass = 0, waits = 0;
  // conv1: a GEMM (1000 ns; 3000 ns in the second traced pass) and a memset (200 ns);
  // pool: one kernel, 500 ns; fc: two launches of one kernel, 300 ns each.
  auto run_layer = [&](std::size_t i) {
    if (i == 0) {
      tracer.launch("gemm_kernel", pass == 2 ? 3000 : 1000);
      tracer.launch("[memset]", 200);
    } else if (i == 1) {
      tracer.launch("max_pool", 500);
    } else {
      tracer.launch("linear", 300);
      tracer.launch("linear", 300);
    }
  };
  auto wait = [&] {
    ++waits;
    ++pass;  // the untraced warm-up runs as pass 0, the traced passes as 1, 2 and 3
  };
  const gpucmp::network_trace t = gpucmp::trace_layers(
      tracer, names.size(), run_layer, [&](std::size_t i) { return names[i]; }, wait, 3);

  CHECK(waits == 4);           // after the warm-up and after each traced pass
  CHECK(tracer.collects == 3);  // one per traced pass
  CHECK(tracer.starts == 1);
  CHECK(tracer.stops == 1);
  CHECK_FALSE(tracer.open);
  CHECK(t.passes == 3);
  REQUIRE(t.layers.size() == 3);
  CHECK(t.layers[0].layer == "conv1");
  CHECK(t.layers[2].layer == "fc");
  // Medians over the passes: conv1 1200 ns in two passes, 3200 ns in one -> 1200 ns.
  CHECK(t.layers[0].busy_s == Approx(1200e-9));
  CHECK(t.layers[1].busy_s == Approx(500e-9));
  CHECK(t.layers[2].busy_s == Approx(600e-9));
  CHECK(t.busy_s == Approx(2300e-9));
  CHECK(t.layers[0].share == Approx(1200.0 / 2300.0));
  // A pass: five activities, 100 ns apart (the median pass is a 2300 ns one).
  CHECK(t.eager_span_s == Approx((2300 + 4 * 100) * 1e-9));
  // conv1's breakdown: the GEMM first (largest total), once per pass; the memset once per pass.
  REQUIRE(t.layers[0].kernels.size() == 2);
  CHECK(t.layers[0].kernels[0].name == "gemm_kernel");
  CHECK(t.layers[0].kernels[0].per_launch == Approx(1.0));
  CHECK(t.layers[0].kernels[0].median_s == Approx(1000e-9));
  CHECK(t.layers[0].kernels[1].name == "[memset]");
  REQUIRE(t.layers[2].kernels.size() == 1);
  CHECK(t.layers[2].kernels[0].per_launch == Approx(2.0));
  CHECK(t.dropped_records == 0);
}

TEST_CASE("records of other samples are not counted as a layer's", "[layer_trace]") {
  fake_tracer tracer;
  auto run_layer = [&](std::size_t) {
    tracer.launch("kernel", 1000);
    gpucmp::activity_record stray;  // e.g. left in the tracer from an earlier measurement
    stray.name = "stray";
    stray.start_ns = 0;
    stray.end_ns = 1000000;
    stray.sample = 1u << 30;
    tracer.pending.push_back(stray);
  };
  const auto t = gpucmp::trace_layers(
      tracer, 2, run_layer, [](std::size_t i) { return "layer" + std::to_string(i); }, [] {}, 2);
  CHECK(t.layers[0].busy_s == Approx(1000e-9));
  CHECK(t.busy_s == Approx(2000e-9));
  CHECK(t.layers[0].kernels.size() == 1);
}

TEST_CASE("trace_layers rejects zero layers or passes by name", "[layer_trace]") {
  fake_tracer tracer;
  auto none = [](std::size_t) {};
  auto name = [](std::size_t) { return std::string("x"); };
  CHECK_THROWS_WITH(gpucmp::trace_layers(tracer, 0, none, name, [] {}, 3),
                    GPUCMP_CONTAINS("trace_layers: the network has no layers"));
  CHECK_THROWS_WITH(gpucmp::trace_layers(tracer, 2, none, name, [] {}, 0),
                    GPUCMP_CONTAINS("trace_layers: passes must be >= 1"));
  CHECK(tracer.starts == 0);
}

TEST_CASE("a layer that throws closes its sample and stops the tracer", "[layer_trace]") {
  fake_tracer tracer;
  int calls = 0;
  auto run_layer = [&](std::size_t i) {
    // Throws in the first traced pass (calls 0 and 1 are the warm-up).
    if (++calls > 2 && i == 1) throw std::runtime_error("layer 1 failed");
  };
  CHECK_THROWS_WITH(gpucmp::trace_layers(tracer, 2, run_layer, [](std::size_t) { return std::string("x"); }, [] {}, 2),
                    "layer 1 failed");
  CHECK_FALSE(tracer.open);
  CHECK(tracer.stops == 1);
}

TEST_CASE("dropped records are reported with the trace", "[layer_trace]") {
  fake_tracer tracer;
  tracer.dropped = 7;
  const auto t = gpucmp::trace_layers(
      tracer, 1, [&](std::size_t) { tracer.launch("k", 10); }, [](std::size_t) { return std::string("x"); }, [] {}, 1);
  CHECK(t.dropped_records == 7);
}

TEST_CASE("without a registered tracer, make_activity_tracer says what to include and link", "[layer_trace]") {
  auto& factory = gpucmp::detail::registered_tracer_factory();
  const gpucmp::activity_tracer_factory saved = factory;
  factory = nullptr;
  CHECK_THROWS_WITH(gpucmp::make_activity_tracer(),
                    GPUCMP_CONTAINS("kernel mode unavailable: no activity tracer is registered (include "
                                    "<gpucmp/measure/kernel_trace.hpp> and link gpucmp::cupti)"));
  factory = saved;
}
