// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The Google Benchmark adapter end to end: registrations run through RunSpecifiedBenchmarks
// with a capturing reporter.
#include "catch.hpp"
#include "gbench_capture.hpp"
#include "test_kernels.hpp"

#include <gpucmp/bench.hpp>
#if GPUCMP_TEST_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>
#endif

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

void spin_benchmark(gpucmp::state& st) {
  const double seconds = static_cast<double>(st.range(0)) * 1e-6;
  st.add_bytes_read(1e6);  // declared, so GB/s = 1e6 / time
  st.add_items(2);
  st.run([=](cudaStream_t s) { gpucmp_test::launch_spin(s, seconds); });
}

void throwing_benchmark(gpucmp::state&) { throw gpucmp::unsupported("fp8 needs sm_89+"); }
void forgetful_benchmark(gpucmp::state&) {}
void invalid_launch_benchmark(gpucmp::state& st) { st.run(gpucmp_test::launch_invalid_configuration); }

struct buffer_fixture : benchmark::Fixture {
  using benchmark::Fixture::SetUp;
  using benchmark::Fixture::TearDown;
  void SetUp(const benchmark::State& gb) override { input = gpucmp::device_buffer<float>(gb.range(0)); }
  void TearDown(const benchmark::State&) override { input = {}; }
  gpucmp::device_buffer<float> input;
};

}  // namespace

GPUCMP_BENCHMARK_DEFINE_F(buffer_fixture, read)(gpucmp::state& st) {
  const int blocks = 2 * st.device().sm_count;
  gpucmp::device_buffer<float> partial(static_cast<std::size_t>(blocks), gpucmp::initial_fill::uninitialized());
  st.add_bytes_read(static_cast<double>(input.bytes()));
  st.run([&](cudaStream_t s) { gpucmp_test::launch_read_sum(s, input.data(), input.size(), partial.data(), blocks); });
}
GPUCMP_BENCHMARK_REGISTER_F(buffer_fixture, read, gpucmp::mode::cold)->Arg(1 << 24);

TEST_CASE("a registered benchmark reports the engine's per-launch time and rates", "[gpu][gbench]") {
  gpucmp::register_benchmark("adapter_spin", spin_benchmark, {gpucmp::mode::hot, gpucmp::mode::graph})->Arg(100);
  const auto runs = gpucmp_test::run_matching("^adapter_spin/");
  REQUIRE(runs.size() == 2);
  for (const char* name : {"adapter_spin/hot/100/iterations:1/manual_time", "adapter_spin/graph/100/iterations:1/manual_time"}) {
    INFO(name);
    REQUIRE(runs.count(name) == 1);
    const gpucmp_test::captured_run& r = runs.at(name);
    CHECK(r.error.empty());
    CHECK(r.seconds_per_iteration >= 100e-6);  // the spin lasts at least its nominal time
    // Hot and graph mode add the stream's kernel-to-kernel gap (under 1.7 us on an H200) and
    // the spin's own overshoot to a 100 us spin.
    GPUCMP_CHECK_TIMING(r.seconds_per_iteration <= 102e-6);
    CHECK(r.counters.at("GB/s") == Approx(1e6 / r.seconds_per_iteration * 1e-9));
    CHECK(r.counters.at("items/s") == Approx(2 / r.seconds_per_iteration));
    CHECK(r.counters.count("TFLOP/s") == 0);  // no FLOPs were declared
    CHECK(r.counters.at("samples") >= 10);
    CHECK(r.counters.at("batch") >= 1);
    CHECK(r.counters.at("min_us") <= r.counters.at("p90_us"));
    GPUCMP_CHECK_TIMING(r.counters.at("noise_pct") < 5);  // a spin is steady: the noise rule's target is 0.5 %
    // Against the datasheet: 1 MB read per launch is memory-bound and fits in L2.
    const gpucmp::gpu_profile spec = gpucmp::spec_for_device(gpucmp::query_current_device());
    CHECK(r.counters.at("pct_of_peak") == Approx(100 * r.counters.at("GB/s") / spec.memory_bandwidth_gbs));
    CHECK_THAT(r.label, GPUCMP_CONTAINS("memory-bound; working set fits in L2"));
  }
}

TEST_CASE("the --gpucmp_batch flag fixes the launches per sample of every benchmark", "[gpu][gbench]") {
  struct restore_batch {  // the flag is process-wide: later tests must choose their own batch again
    ~restore_batch() { gpucmp::detail::flags_everywhere().batch = 0; }
  } restore;
  for (std::size_t launches : {std::size_t{7}, std::size_t{40}}) {
    gpucmp::detail::flags_everywhere().batch = launches;
    const std::string name = "adapter_batch_" + std::to_string(launches);
    gpucmp::register_benchmark(name, spin_benchmark, {gpucmp::mode::hot, gpucmp::mode::graph})->Arg(100);
    const auto runs = gpucmp_test::run_matching("^" + name + "/");
    REQUIRE(runs.size() == 2);
    for (const auto& [run_name, r] : runs) {
      INFO(run_name);
      CHECK(r.error.empty());
      CHECK(r.counters.at("batch") == static_cast<double>(launches));
      CHECK(r.seconds_per_iteration >= 100e-6);
      GPUCMP_CHECK_TIMING(r.seconds_per_iteration <= 103e-6);  // as above; 7 launches spread the gap less
    }
  }
}

TEST_CASE("errors become skipped runs with their message and the run goes on", "[gpu][gbench][api_error]") {
  const int failed_before = gpucmp::detail::tally().failed;
  gpucmp::register_benchmark("adapter_errors/throwing", throwing_benchmark);
  gpucmp::register_benchmark("adapter_errors/forgetful", forgetful_benchmark);
  gpucmp::register_benchmark("adapter_errors/invalid_launch", invalid_launch_benchmark);
  gpucmp::register_benchmark("adapter_errors/ok", spin_benchmark)->Arg(10);
  const auto runs = gpucmp_test::run_matching("^adapter_errors/");
  REQUIRE(runs.size() == 4);
  // unsupported (and out_of_memory) are typed results, reported with their message but not
  // counted as failures: a sweep over every precision must not fail on a GPU that lacks one.
  CHECK(runs.at("adapter_errors/throwing/hot/iterations:1/manual_time").error == "unsupported: fp8 needs sm_89+");
  CHECK_THAT(runs.at("adapter_errors/forgetful/hot/iterations:1/manual_time").error,
             GPUCMP_CONTAINS("returned without calling gpucmp::state::run"));
  CHECK_THAT(runs.at("adapter_errors/invalid_launch/hot/iterations:1/manual_time").error,
             GPUCMP_CONTAINS("failed: CUDA error cudaErrorInvalid"));
  CHECK(runs.at("adapter_errors/ok/hot/10/iterations:1/manual_time").error.empty());
  CHECK(gpucmp::detail::tally().failed == failed_before + 2);
}

TEST_CASE("every run's typed row gives its status, mode, work and time, errors included", "[gpu][gbench][api_error]") {
  gpucmp::register_benchmark("adapter_typed/ok", spin_benchmark, {gpucmp::mode::hot, gpucmp::mode::graph})->Arg(20);
  gpucmp::register_benchmark("adapter_typed/throwing", throwing_benchmark);
  gpucmp::register_benchmark("adapter_typed/invalid_launch", invalid_launch_benchmark);
  std::stringstream out;
  gpucmp::typed_json_reporter reporter;  // as the display reporter, writing into `out`
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&out);
  benchmark::RunSpecifiedBenchmarks(&reporter, "^adapter_typed/");
  const auto file = gpucmp::detail::parse_json(out.str());
  std::map<std::string, gpucmp::result_row> rows;
  for (auto& r : gpucmp::result_rows_of(file, "adapter_typed")) rows[r.benchmark] = r;
  REQUIRE(rows.size() == 4);
  for (const char* name : {"adapter_typed/ok/hot/20", "adapter_typed/ok/graph/20"}) {
    INFO(name);
    const gpucmp::result_row& r = rows.at(name);
    CHECK(r.status == gpucmp::result_status::ok);
    CHECK(r.timing_mode == (std::string(name).find("graph") != std::string::npos ? gpucmp::mode::graph : gpucmp::mode::hot));
    CHECK(r.seconds >= 20e-6);  // the spin lasts at least its nominal time
    CHECK(r.seconds_min <= r.seconds);
    CHECK(r.seconds_max >= r.seconds);
    CHECK(r.declared.bytes_read == 1e6);
    CHECK(r.declared.items == 2);
    CHECK_FALSE(r.has_flops);
    CHECK(r.declared.arithmetic == gpucmp::precision::none);
    CHECK(r.samples >= 10);
    CHECK(r.name == std::string(name) + "/iterations:1/manual_time");
  }
  CHECK(rows.at("adapter_typed/throwing/hot").status == gpucmp::result_status::unsupported);
  CHECK(rows.at("adapter_typed/throwing/hot").message == "unsupported: fp8 needs sm_89+");
  CHECK(rows.at("adapter_typed/invalid_launch/hot").status == gpucmp::result_status::failed);
  CHECK(std::isnan(rows.at("adapter_typed/invalid_launch/hot").seconds));
  gpucmp::detail::reported_rows().clear();
}

TEST_CASE("a fixture's buffers are set up outside the timed path and measured cold", "[gpu][gbench]") {
  const auto runs = gpucmp_test::run_matching("^buffer_fixture/read/");
  REQUIRE(runs.size() == 1);
  const gpucmp_test::captured_run& r = runs.begin()->second;
  INFO(runs.begin()->first << ": " << r.error);
  CHECK(runs.begin()->first == "buffer_fixture/read/cold/16777216/iterations:1/manual_time");
  CHECK(r.error.empty());
  // 64 MiB read from DRAM after an L2 flush: between 0.5 and 10 TB/s on any GPU gpucmp targets.
  GPUCMP_CHECK_TIMING(r.counters.at("GB/s") > 500);
  CHECK(r.counters.at("GB/s") < 10000);
}

#if GPUCMP_TEST_KERNEL_MODE
TEST_CASE("kernel mode reports busy time, span, gaps and the kernels in the label", "[gpu][gbench][cupti]") {
  gpucmp::register_benchmark("adapter_kernel", spin_benchmark, {gpucmp::mode::kernel})->Arg(50);
  const auto runs = gpucmp_test::run_matching("^adapter_kernel/");
  REQUIRE(runs.size() == 1);
  const gpucmp_test::captured_run& r = runs.at("adapter_kernel/kernel/50/iterations:1/manual_time");
  INFO(r.error << " " << r.label);
  CHECK(r.error.empty());
  CHECK(r.seconds_per_iteration >= 50e-6);
  GPUCMP_CHECK_TIMING(r.seconds_per_iteration <= 51.0e-6);  // the spin's own overshoot, +1 us as in kernel_mode_test
  CHECK(r.counters.at("span_us") == Approx(r.seconds_per_iteration * 1e6).epsilon(0.01));
  CHECK(r.counters.at("idle_us") == 0);
  CHECK(r.counters.at("traced_event_us") >= r.seconds_per_iteration * 1e6);
  CHECK(r.label.rfind("kernels: gpucmp::kernels::spin_for(unsigned long) 100.0% (1/launch)", 0) == 0);
  REQUIRE_FALSE(gpucmp::detail::kernel_breakdowns().empty());
  CHECK(gpucmp::detail::kernel_breakdowns().back().benchmark == "adapter_kernel/kernel");
}
#endif

TEST_CASE("a serving run is a row: latency percentiles and rates, timed in rounds through the engine", "[gpu][gbench][serving]") {
  struct restore_typed {
    bool typed = gpucmp::detail::typed_rows_enabled();
    ~restore_typed() { gpucmp::detail::typed_rows_enabled() = typed; }
  } restore;
  gpucmp::detail::typed_rows_enabled() = true;
  const std::size_t rows_before = gpucmp::detail::pending_rows().size();
  gpucmp::register_benchmark(
      "adapter_serving",
      [](gpucmp::state& st) {
        gpucmp::serving_options o;
        o.pattern = gpucmp::arrival_pattern::fixed_rate;
        o.rate_per_s = 2000;  // 20 % busy with 100 us requests
        o.requests = 200;
        o.round_requests = 50;
        st.run_serving([](cudaStream_t s) { gpucmp_test::launch_spin(s, 100e-6); }, o);
      },
      {gpucmp::mode::hot});
  const auto runs = gpucmp_test::run_matching("^adapter_serving/");
  REQUIRE(runs.size() == 1);
  const gpucmp_test::captured_run& r = runs.begin()->second;
  CHECK(r.error.empty());
  CHECK(r.counters.at("latency_p50_us") >= 100);
  CHECK(r.counters.at("latency_p99_us") >= r.counters.at("latency_p50_us"));
  CHECK(r.counters.at("requests_per_s") == Approx(2000).epsilon(0.1));
  REQUIRE(gpucmp::detail::pending_rows().size() == rows_before + 1);
  const gpucmp::result_row& row = gpucmp::detail::pending_rows().back().row;
  REQUIRE(row.ok());
  REQUIRE(row.latency.has_value());
  CHECK(row.latency->pattern == "fixed_rate");
  CHECK(row.latency->requests >= 200);
  CHECK(row.seconds >= 100e-6);  // the median of the rounds' median latencies
  CHECK(row.described.find("pattern")->text == "fixed_rate");
  CHECK(*row.described.find("rate_per_s")->number == 2000);
}
