// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"
#include "test_kernels.hpp"

#include <gpucmp/measure/engine.hpp>

#include <chrono>
#include <string>

namespace {
// The engine still measures correctly after an error.
void check_engine_still_works(gpucmp::engine& eng) {
  gpucmp::measure_options o;
  o.min_gpu_time_s = 0.01;
  const auto r = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 50e-6); }, gpucmp::mode::hot, o);
  CHECK(r.gpu.median >= 50e-6);
  GPUCMP_CHECK_TIMING(r.gpu.median < 60e-6);  // a 50 us spin plus the stream's gap (under 2 us)
}
}  // namespace

TEST_CASE("code that synchronizes while held trips the hold timeout, with advice", "[gpu][engine][errors][api_error]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.hold_timeout_s = 0.3;
  auto synchronizing = [](cudaStream_t s) {
    gpucmp_test::launch_spin(s, 10e-6);
    cudaStreamSynchronize(s);
  };
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(eng.measure(synchronizing, gpucmp::mode::hot, o), gpucmp::hold_timeout);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited < 5.0);

  const auto failed = eng.try_measure(synchronizing, gpucmp::mode::hot, o);
  CHECK(failed.status == gpucmp::result_status::failed);
  CHECK_THAT(failed.message, GPUCMP_CONTAINS("stream hold timed out after 0.3 s"));
  // The first launch of the first sample blocked in its cudaStreamSynchronize: the message
  // names it, so a user knows which step of a measurement waits for the held stream.
  CHECK_THAT(failed.message, GPUCMP_CONTAINS("the host was in launch 0 of the measured callable"));
  CHECK_THAT(failed.message, GPUCMP_CONTAINS("hold = false"));

  o.hold = false;  // the documented opt-out
  const auto unheld = eng.try_measure(synchronizing, gpucmp::mode::hot, o);
  INFO(unheld.message);
  CHECK(unheld.ok());
  CHECK_FALSE(unheld.stream_held);
  check_engine_still_works(eng);
}

TEST_CASE("an invalid launch becomes a cuda_error naming the launch and the error", "[gpu][engine][errors][api_error]") {
  gpucmp::engine eng;
  try {
    eng.measure([](cudaStream_t s) { gpucmp_test::launch_invalid_configuration(s); }, gpucmp::mode::hot);
    FAIL("no exception");
  } catch (const gpucmp::cuda_error& e) {
    // CUDA 12 reports 4096 threads per block as an invalid configuration, CUDA 13 as an invalid value.
    CHECK((e.code() == cudaErrorInvalidConfiguration || e.code() == cudaErrorInvalidValue));
    CHECK_FALSE(e.sticky());
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("launch 0 of the measured callable (warm-up)"));
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS(cudaGetErrorName(e.code())));
  }
  const auto r = eng.try_measure([](cudaStream_t s) { gpucmp_test::launch_invalid_configuration(s); },
                                 gpucmp::mode::graph);
  CHECK(r.status == gpucmp::result_status::failed);
  check_engine_still_works(eng);
}

TEST_CASE("code a graph cannot hold fails the capture cleanly", "[gpu][engine][errors][api_error]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.hold = false;
  const auto r = eng.try_measure(
      [](cudaStream_t s) {
        gpucmp_test::launch_spin(s, 10e-6);
        cudaStreamSynchronize(s);  // allowed in warm-up, not inside a capture
      },
      gpucmp::mode::graph, o);
  CHECK(r.status == gpucmp::result_status::failed);
  CHECK_THAT(r.message, GPUCMP_CONTAINS("graph capture"));
  check_engine_still_works(eng);
}

TEST_CASE("invalid options are rejected before any GPU work", "[gpu][engine][errors]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.min_samples = 0;
  std::size_t calls = 0;
  CHECK_THROWS_WITH(eng.measure([&](cudaStream_t) { ++calls; }, gpucmp::mode::hot, o),
                    GPUCMP_CONTAINS("min_samples must be >= 1"));
  CHECK(calls == 0);
}

TEST_CASE("an exception from the callable is a failed result, and samples are kept", "[gpu][engine][errors]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.warmup_launches = 1;
  o.warmup_time_s = 0;
  o.batch = 1;
  o.min_samples = 100;
  std::size_t calls = 0;
  const auto r = eng.try_measure(
      [&](cudaStream_t s) {
        if (++calls == 6) throw std::runtime_error("input exhausted");
        gpucmp_test::launch_spin(s, 10e-6);
      },
      gpucmp::mode::hot, o);
  CHECK(r.status == gpucmp::result_status::failed);
  CHECK(r.message == "input exhausted");
  CHECK(r.gpu_s.size() == 4);  // warm-up took call 1; samples 1-4 completed before call 6 threw
  CHECK(r.gpu.count == 4);
  check_engine_still_works(eng);
}

TEST_CASE("a launch that runs past the time budget ends as a typed timeout without blocking", "[gpu][engine][errors][api_error]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.timeout_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  const auto r = eng.try_measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 1.5); }, gpucmp::mode::hot, o);
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.message << " after " << waited_s << " s");
  CHECK(r.status == gpucmp::result_status::timeout);
  CHECK_THAT(r.message, GPUCMP_CONTAINS("timeout: the measurement ran past its 0.3 s budget"));
  CHECK_THAT(r.message, GPUCMP_CONTAINS("during the warm-up"));
  // The 1.5 s spin is still running when the budget ends; the engine does not wait for it.
  GPUCMP_CHECK_TIMING(waited_s < 1.0);
  // The engine stays usable: once the spin has finished, the next measurement runs.
  REQUIRE(cudaStreamSynchronize(eng.stream()) == cudaSuccess);
  CHECK(eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 10e-6); }, gpucmp::mode::hot).ok());
}

TEST_CASE("a measurement that samples past the time budget keeps its samples as a timeout", "[gpu][engine][errors][api_error]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.timeout_s = 0.5;
  o.min_samples = 100000;  // 2 ms samples: the noise rule alone would sample for minutes
  o.max_samples = 100000;
  o.max_wall_time_s = 600;
  o.batch = 1;
  const auto r = eng.try_measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 2e-3); }, gpucmp::mode::graph, o);
  CHECK(r.status == gpucmp::result_status::timeout);
  CHECK_THAT(r.message, GPUCMP_CONTAINS("during sampling"));
  CHECK(r.gpu_s.size() > 10);  // what was measured before the budget ran out is kept
  CHECK(r.gpu.count == r.gpu_s.size());
}
