// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"
#include "test_kernels.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <chrono>

#include <cstddef>

TEST_CASE("cold mode is colder: an L2-resident read is slower after a flush", "[gpu][engine][modes][timing]") {
  gpucmp::engine eng;
  // A quarter of L2: resident between hot launches, evicted by every cold flush.
  const std::size_t floats = eng.device().l2_bytes / 4 / sizeof(float) / 4 * 4;
  const int blocks = 2 * eng.device().sm_count;
  gpucmp::device_buffer<float> in(floats);
  gpucmp::device_buffer<float> partial(static_cast<std::size_t>(blocks), gpucmp::initial_fill::uninitialized());
  auto read = [&](cudaStream_t s) { gpucmp_test::launch_read_sum(s, in.data(), floats, partial.data(), blocks); };
  const auto cold = eng.measure(read, gpucmp::mode::cold);
  const auto hot = eng.measure(read, gpucmp::mode::hot);
  INFO("read of " << floats * 4 / 1e6 << " MB: cold median " << cold.gpu.median * 1e6 << " us, hot median "
                  << hot.gpu.median * 1e6 << " us");
  CHECK(cold.batch == 1);
  CHECK(cold.l2_flush_bytes == 2 * eng.device().l2_bytes);
  CHECK(hot.l2_flush_bytes == 0);
  CHECK(cold.gpu.median > 1.2 * hot.gpu.median);
  CHECK(cold.gpu.p10 > hot.gpu.p90);
}

TEST_CASE("all three modes run on one engine and record how they sampled", "[gpu][engine][modes]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.warmup_launches = 7;
  o.warmup_time_s = 0;
  o.min_samples = 12;
  o.min_gpu_time_s = 0.02;
  for (auto m : {gpucmp::mode::cold, gpucmp::mode::hot, gpucmp::mode::graph}) {
    std::size_t calls = 0;
    const auto r = eng.measure(
        [&](cudaStream_t s) {
          ++calls;
          gpucmp_test::launch_spin(s, 20e-6);
        },
        m, o);
    INFO("mode " << gpucmp::to_string(m) << ": batch " << r.batch << ", samples " << r.gpu.count);
    CHECK(r.ok());
    CHECK(r.timing_mode == m);
    CHECK(r.warmup_launches == 7);
    CHECK(r.gpu.count >= 12);
    CHECK(r.gpu_s.size() == r.gpu.count);
    CHECK(r.wall_s.size() == r.gpu.count);
    CHECK(r.launches == r.gpu.count * r.batch);
    CHECK(r.gpu.mean * static_cast<double>(r.launches) >= 0.02 * 0.999);
    CHECK(r.wall.median >= r.gpu.min);  // the host waited at least as long as the GPU ran
    CHECK(r.stream_held);
    if (m == gpucmp::mode::cold) {
      CHECK(r.batch == 1);
      CHECK(calls == 7 + r.launches);
    } else {
      // min_sample_time 1 ms over the warm-up's single-launch time: 20 us plus launch latency
      // (at most 20 us more) gives 25 to 50 launches.
      GPUCMP_CHECK_TIMING(r.batch <= 50);
      GPUCMP_CHECK_TIMING(r.batch >= 25);
      // hot: every launch is a call; graph: captured once, replayed for every sample.
      CHECK(calls == 7 + (m == gpucmp::mode::hot ? r.launches : r.batch));
    }
  }
}

TEST_CASE("a fixed batch is used as given", "[gpu][engine][modes]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.batch = 3;
  o.min_gpu_time_s = 0.01;
  const auto r = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 10e-6); }, gpucmp::mode::hot, o);
  CHECK(r.batch == 3);
}

TEST_CASE("the hold is never used during warm-up", "[gpu][engine][modes]") {
  // This callable synchronizes its stream during warm-up only; a hold there would deadlock
  // until the watchdog fired and the measurement failed.
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.warmup_launches = 5;
  o.warmup_time_s = 0;
  o.hold_timeout_s = 0.5;
  o.min_gpu_time_s = 0.01;
  std::size_t calls = 0;
  const auto r = eng.try_measure(
      [&](cudaStream_t s) {
        gpucmp_test::launch_spin(s, 10e-6);
        if (++calls <= 5) cudaStreamSynchronize(s);
      },
      gpucmp::mode::hot, o);
  INFO(r.message);
  CHECK(r.ok());
  CHECK(r.stream_held);
}

TEST_CASE("the stopping rule ends a steady measurement by convergence", "[gpu][engine][modes][timing]") {
  gpucmp::engine eng;
  const auto r = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 200e-6); }, gpucmp::mode::graph);
  INFO("noise " << r.gpu.relative_noise * 100 << " %, stopped by " << gpucmp::to_string(r.stopped_by));
  CHECK(r.stopped_by == gpucmp::stop_reason::converged);
  CHECK(r.noise_target_met);
  CHECK(r.warnings.empty());
  CHECK(r.gpu.mean * static_cast<double>(r.launches) >= 0.1 * 0.999);
}

TEST_CASE("a cool-down waits for earlier work, then idles before the warm-up", "[gpu][engine][modes]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.cooldown_s = 0.2;
  o.warmup_launches = 3;
  o.warmup_time_s = 0;
  o.min_gpu_time_s = 0.01;
  // 0.3 s of work on another stream: "idle" must begin only after it has finished.
  const gpucmp::stream other;
  gpucmp_test::launch_spin(other.get(), 0.3);
  const auto start = std::chrono::steady_clock::now();
  const auto r = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 20e-6); }, gpucmp::mode::hot, o);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("measure took " << elapsed << " s");
  CHECK(r.ok());
  CHECK(r.cooldown_s == 0.2);
  CHECK(elapsed >= 0.3 + 0.2 - 0.01);  // the earlier work's time plus the idle, not either alone
  // Without a cool-down the record says so and the measurement does not idle.
  o.cooldown_s = 0;
  const auto start_plain = std::chrono::steady_clock::now();
  const auto plain = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 20e-6); }, gpucmp::mode::hot, o);
  const double plain_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_plain).count();
  CHECK(plain.cooldown_s == 0);
  // The plain measurement (a 20 ms warm-up and 10 ms of samples) takes far less than the
  // 0.2 s idle it leaves out.
  GPUCMP_CHECK_TIMING(plain_s < elapsed - 0.15);
}

TEST_CASE("a fixed window samples that much GPU time, whatever the noise", "[gpu][engine][modes]") {
  gpucmp::engine eng;
  gpucmp::measure_options o;
  o.window_s = 0.1;
  o.batch = 5;               // 5 ms samples of 1 ms spins: the window needs about 20
  o.target_noise = 1e-9;     // the noise rule alone would never stop
  o.max_wall_time_s = 10;
  const auto r = eng.measure([](cudaStream_t s) { gpucmp_test::launch_spin(s, 1e-3); }, gpucmp::mode::graph, o);
  const double measured_s = r.gpu.mean * static_cast<double>(r.launches);
  INFO("samples " << r.gpu.count << ", measured " << measured_s << " s, stopped by " << gpucmp::to_string(r.stopped_by));
  CHECK(r.ok());
  CHECK(r.stopped_by == gpucmp::stop_reason::fixed_window);
  CHECK(r.window_s == 0.1);
  CHECK(measured_s >= 0.1 * 0.999);
  // Stops at the first sample past the window: one 5 ms sample at most, while the spins last
  // their nominal time (a sanitizer stretches them).
  GPUCMP_CHECK_TIMING(measured_s < 0.1 + 1.5 * 5e-3);
}
