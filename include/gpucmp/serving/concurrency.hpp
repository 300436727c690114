// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Throughput under concurrency: N copies of a workload, each on its own stream with its own
// buffers, launched together; aggregate throughput against one copy alone, and each
// stream's per-launch latency. This is what MIG partitioning or multi-model serving trades:
// more work in flight for slower individual requests.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/serving/latency.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace gpucmp {

/// One concurrency level's outcome.
struct concurrency_result {
  std::size_t streams = 0;                 ///< copies run at once
  std::size_t launches_per_stream = 0;     ///< launches each copy made
  double window_s = 0;                     ///< first start to last end, GPU time
  double aggregate_per_s = 0;              ///< launches per second, all streams together
  std::vector<latency_summary> per_stream; ///< each stream's per-launch GPU time
  latency_summary all_launches;            ///< every launch's GPU time, all streams
};

/// Runs `streams` copies made by `make(i)` (each returns a callable `void(cudaStream_t)` that
/// owns its buffers), `launches` times each, all streams queued before any is waited on.
template <class Make>
concurrency_result run_concurrent(Make&& make, std::size_t streams, std::size_t launches) {
  if (streams == 0 || launches == 0) throw invalid_argument("run_concurrent: streams and launches must be > 0");
  using workload = std::function<void(cudaStream_t)>;
  std::vector<workload> copies;
  std::vector<stream> lanes(streams);
  for (std::size_t s = 0; s < streams; ++s) copies.emplace_back(make(s));
  // Warm-up each copy on its own stream (allocation, lazy loading, library plans).
  for (std::size_t s = 0; s < streams; ++s) {
    copies[s](lanes[s].get());
    lanes[s].synchronize();
  }
  // Per launch: an event before and after; all queued breadth-first so the streams overlap.
  std::vector<std::vector<event>> marks(streams);
  for (auto& m : marks) m.resize(launches + 1);
  for (std::size_t s = 0; s < streams; ++s) marks[s][0].record(lanes[s].get());
  for (std::size_t i = 0; i < launches; ++i) {
    for (std::size_t s = 0; s < streams; ++s) {
      copies[s](lanes[s].get());
      marks[s][i + 1].record(lanes[s].get());
    }
  }
  for (auto& lane : lanes) lane.synchronize();

  concurrency_result r;
  r.streams = streams;
  r.launches_per_stream = launches;
  // Events of different streams share the device's clock: measure everything from the
  // first stream's first mark (the earliest may be on another stream: take the minimum).
  double first = 0, last = 0;
  std::vector<double> every;
  for (std::size_t s = 0; s < streams; ++s) {
    const double start = elapsed_s(marks[0][0], marks[s][0]);  // negative if this stream started first
    first = std::min(first, start);
    last = std::max(last, elapsed_s(marks[0][0], marks[s][launches]));
    std::vector<double> own;
    for (std::size_t i = 0; i < launches; ++i) own.push_back(elapsed_s(marks[s][i], marks[s][i + 1]));
    every.insert(every.end(), own.begin(), own.end());
    r.per_stream.push_back(summarize_latencies(own));
  }
  r.window_s = last - first;
  r.aggregate_per_s = r.window_s > 0 ? double(streams * launches) / r.window_s : 0.0;
  r.all_launches = summarize_latencies(every);
  return r;
}

}  // namespace gpucmp
