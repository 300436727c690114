// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Throughput under concurrency: N copies of a workload, each on its own stream with its own
// buffers, launched together; aggregate throughput against one copy alone, and each
// stream's per-launch latency. This is what MIG partitioning or multi-model serving trades:
// more work in flight for slower individual requests. Rounds are timed through the engine
// (stopping rule, stream hold, power, time budget).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/serving/latency.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// One concurrency level's outcome.
struct concurrency_result {
  std::size_t streams = 0;                 ///< copies run at once
  std::size_t launches_per_stream = 0;     ///< launches each copy made per round
  double window_s = 0;                     ///< first start to last end of the median round, GPU time
  double aggregate_per_s = 0;              ///< launches per second, all streams together (median round)
  std::vector<latency_summary> per_stream; ///< each stream's per-launch GPU time, every measured round
  latency_summary all_launches;            ///< every launch's GPU time, all streams, every measured round
  measurement rounds;                      ///< the engine's record: one sample per round (GPU time per launch, all streams)
};

/// Engine settings for concurrency rounds: at least 5 rounds, 1 % noise target.
inline measure_options concurrency_measure_defaults() {
  measure_options m;
  m.min_samples = 5;
  m.target_noise = 0.01;
  m.min_gpu_time_s = 0;
  m.warmup_time_s = 0;
  return m;
}

/// Runs `streams` copies made by `make(i)` (each returns a callable `void(cudaStream_t)` that
/// owns its buffers), in rounds timed through `eng` (try_measure_rounds: a warm-up round,
/// the stopping rule over the rounds' GPU time per launch, power when `measuring` asks, the
/// time budget). Each round queues `launches` launches on every stream, breadth-first, behind
/// the engine's held stream (all streams start together when it is released; without a hold
/// when a stream's launches and their events, 2 x launches, are above measuring.max_batch:
/// a stream's launch queue is finite).
/// A failure is the result's rounds.status and message.
template <class Make>
concurrency_result run_concurrent(Make&& make, std::size_t streams, std::size_t launches, engine& eng,
                                  const measure_options& measuring = concurrency_measure_defaults()) {
  if (streams == 0 || launches == 0) throw invalid_argument("run_concurrent: streams and launches must be > 0");
  measuring.validate();
  using workload = std::function<void(cudaStream_t)>;
  std::vector<workload> copies;
  std::vector<stream> lanes(streams);
  for (std::size_t s = 0; s < streams; ++s) copies.emplace_back(make(s));
  struct round_times {
    double window_s = 0;
    std::vector<std::vector<double>> per_stream;
  };
  std::vector<round_times> rounds;
  event go;
  std::vector<std::vector<event>> marks(streams);
  for (auto& m : marks) m.resize(launches + 1);
  auto round = [&](cudaStream_t held, engine::round_hold& hold) {
    go.record(held);  // behind the hold: every stream starts when it is released
    for (std::size_t s = 0; s < streams; ++s) {
      GPUCMP_CUDA_CHECK(cudaStreamWaitEvent(lanes[s].get(), go.get(), 0));
      marks[s][0].record(lanes[s].get());
    }
    for (std::size_t i = 0; i < launches; ++i) {
      for (std::size_t s = 0; s < streams; ++s) {
        copies[s](lanes[s].get());
        marks[s][i + 1].record(lanes[s].get());
      }
    }
    hold.release();
    for (auto& lane : lanes) lane.synchronize();
    // Events of different streams share the device's clock: measure everything from the
    // first stream's first mark (the earliest may be on another stream: take the minimum).
    round_times t;
    double first = 0, last = 0;
    for (std::size_t s = 0; s < streams; ++s) {
      first = std::min(first, elapsed_s(marks[0][0], marks[s][0]));
      last = std::max(last, elapsed_s(marks[0][0], marks[s][launches]));
      std::vector<double> own;
      for (std::size_t i = 0; i < launches; ++i) own.push_back(elapsed_s(marks[s][i], marks[s][i + 1]));
      t.per_stream.push_back(std::move(own));
    }
    t.window_s = last - first;
    rounds.push_back(std::move(t));
    engine::round_result sample;
    sample.sample_s = rounds.back().window_s / double(streams * launches);
    sample.gpu_s = rounds.back().window_s;
    return sample;
  };
  concurrency_result r;
  r.streams = streams;
  r.launches_per_stream = launches;
  const bool hold = 2 * launches <= measuring.max_batch;
  r.rounds = eng.try_measure_rounds(round, measuring, hold);
  if (!hold) {
    r.rounds.warnings.push_back("not held: " + std::to_string(launches) + " launches per stream and their events are above "
                                "max_batch " + std::to_string(measuring.max_batch) + ", so the streams start as they are queued");
  }
  const std::size_t warm = std::min(rounds.size(), r.rounds.warmup_launches);
  if (rounds.size() <= warm) return r;
  std::vector<double> every, windows;
  std::vector<std::vector<double>> own(streams);
  for (std::size_t k = warm; k < rounds.size(); ++k) {
    windows.push_back(rounds[k].window_s);
    for (std::size_t s = 0; s < streams; ++s) {
      own[s].insert(own[s].end(), rounds[k].per_stream[s].begin(), rounds[k].per_stream[s].end());
      every.insert(every.end(), rounds[k].per_stream[s].begin(), rounds[k].per_stream[s].end());
    }
  }
  for (const auto& lane : own) r.per_stream.push_back(summarize_latencies(lane));
  r.all_launches = summarize_latencies(every);
  r.window_s = summarize(windows).median;
  r.aggregate_per_s = r.window_s > 0 ? double(streams * launches) / r.window_s : 0.0;
  return r;
}

/// run_concurrent() timed through the process's engine of the current device (arguments checked first).
template <class Make>
concurrency_result run_concurrent(Make&& make, std::size_t streams, std::size_t launches) {
  if (streams == 0 || launches == 0) throw invalid_argument("run_concurrent: streams and launches must be > 0");
  return run_concurrent(std::forward<Make>(make), streams, launches, shared_engine());
}

}  // namespace gpucmp
