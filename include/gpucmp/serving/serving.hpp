// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Serving latency: single requests (a kernel, an operation, a model at some batch) issued
// with an arrival pattern, each request's latency measured from the moment it was due to
// the moment the host saw it complete — what a client of a real-time service waits. Open-
// loop patterns measure from the scheduled arrival, not from the (possibly late) issue, so a
// GPU that falls behind shows its queueing delay instead of hiding it ("coordinated
// omission"). The GPU's own time per request comes from an event pair around it. Requests
// come in rounds timed through the engine, so the stopping rule, the power window, the
// cool-down and the time budget apply to serving as to every other measurement.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/serving/latency.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpucmp {

/// How requests arrive, and how long to measure.
struct serving_options {
  arrival_pattern pattern = arrival_pattern::closed_loop;  ///< when requests arrive
  double rate_per_s = 0;              ///< arrivals per second (fixed_rate, poisson)
  std::size_t requests = 1000;        ///< the fewest measured requests (more when the stopping rule asks)
  std::size_t round_requests = 100;   ///< requests per round; each round's median latency is one sample
  std::uint64_t seed = 1;             ///< Poisson stream (each round draws its own arrivals from it)
  /// The engine's settings for the rounds: warm-up, stopping rule (on the rounds' median
  /// latencies), power window, cool-down, time budget. The stream is never held: each
  /// request is waited for by the host, as a client would.
  measure_options measuring = serving_measure_defaults();

  /// Engine settings suited to request rounds: a few rounds at least, a 2 % noise target
  /// on their medians (latency is noisier than a kernel's time), no minimum GPU time.
  static measure_options serving_measure_defaults() {
    measure_options m;
    m.min_samples = 5;
    m.target_noise = 0.02;
    m.min_gpu_time_s = 0;
    m.warmup_time_s = 0;
    return m;
  }

  /// Throws invalid_argument naming the field that makes no sense.
  void validate() const {
    if (requests == 0) throw invalid_argument("serving_options: requests must be > 0");
    if (round_requests == 0) throw invalid_argument("serving_options: round_requests must be > 0");
    if (pattern != arrival_pattern::closed_loop && !(rate_per_s > 0)) {
      throw invalid_argument(std::string("serving_options: a ") + to_string(pattern) + " pattern needs rate_per_s > 0");
    }
    measuring.validate();
  }
};

/// Latencies of one serving run.
struct serving_result {
  serving_options options;   ///< what was asked
  latency_summary latency;   ///< due -> seen complete by the host, seconds, every measured request
  latency_summary service;   ///< GPU time of the request itself (event pair), seconds
  double offered_per_s = 0;  ///< requests per second offered (closed loop: achieved)
  double achieved_per_s = 0; ///< requests per second completed, over the measured rounds
  std::vector<double> latencies_s;  ///< every measured request's latency, in arrival order
  measurement rounds;        ///< the engine's record of the rounds: status, stopping reason, power, warnings
};

namespace detail {

/// One round's requests: each one's latency (due -> seen complete) and GPU time, and the
/// round's span from the first arrival to the last completion.
struct serving_round {
  std::vector<double> latency_s, service_s;
  double span_s = 0;
};

/// Issues `n` calls of `launch(stream)` on `pattern`'s schedule (arrival times from `seed`)
/// and measures each one's latency and GPU time.
template <class Launch>
serving_round serve_round(Launch& launch, cudaStream_t stream, arrival_pattern pattern, double rate_per_s, std::size_t n,
                          std::uint64_t seed) {
  using clock = std::chrono::steady_clock;
  std::vector<event> begin(n), end(n);
  std::vector<double> due(n, 0.0), done(n, 0.0);
  const std::vector<double> arrivals = arrival_times(pattern, rate_per_s, n, seed);
  const auto t0 = clock::now();
  auto since = [&](clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); };
  auto issue = [&](std::size_t i) {
    begin[i].record(stream);
    launch(stream);
    end[i].record(stream);
  };
  if (pattern == arrival_pattern::closed_loop) {
    for (std::size_t i = 0; i < n; ++i) {
      due[i] = since(clock::now());
      issue(i);
      end[i].synchronize();
      done[i] = since(clock::now());
    }
  } else {
    // The issuer keeps the schedule; the waiter timestamps completions in order.
    std::atomic<std::size_t> issued{0};
    std::exception_ptr failure;
    std::thread waiter([&] {
      try {
        for (std::size_t i = 0; i < n; ++i) {
          while (issued.load(std::memory_order_acquire) <= i) std::this_thread::yield();
          end[i].synchronize();
          done[i] = since(clock::now());
        }
      } catch (...) {
        failure = std::current_exception();
      }
    });
    try {
      for (std::size_t i = 0; i < n; ++i) {
        due[i] = arrivals[i];
        while (since(clock::now()) < due[i]) {
        }  // spin: sleeping would be late by the scheduler's granularity
        issue(i);
        issued.store(i + 1, std::memory_order_release);
      }
    } catch (...) {
      issued.store(n, std::memory_order_release);
      waiter.join();
      throw;
    }
    waiter.join();
    if (failure) std::rethrow_exception(failure);
  }
  serving_round r;
  for (std::size_t i = 0; i < n; ++i) {
    r.latency_s.push_back(done[i] - due[i]);
    r.service_s.push_back(elapsed_s(begin[i], end[i]));
  }
  r.span_s = done[n - 1] - due[0];
  return r;
}

}  // namespace detail

/// Serves requests `launch(stream)` as `options.pattern` says, in rounds of
/// options.round_requests timed through `eng` (try_measure_rounds: warm-up rounds, the
/// stopping rule over the rounds' median latencies, at least options.requests measured
/// requests, power when options.measuring asks, the time budget), and summarises every
/// measured request's latency. `launch` must only enqueue work on the stream it is given.
/// A failure is the result's rounds.status and message (the requests measured before it
/// are kept); bad options throw invalid_argument.
template <class Launch>
serving_result serve(Launch&& launch, const serving_options& options, engine& eng) {
  options.validate();
  std::vector<detail::serving_round> rounds;
  std::uint64_t round_seed = options.seed;
  measure_options measuring = options.measuring;
  const std::size_t needed_rounds = (options.requests + options.round_requests - 1) / options.round_requests;
  measuring.min_samples = std::max(measuring.min_samples, needed_rounds);
  measuring.max_samples = std::max(measuring.max_samples, measuring.min_samples);
  serving_result r;
  r.options = options;
  r.rounds = eng.try_measure_rounds(
      [&](cudaStream_t stream, engine::round_hold&) {
        rounds.push_back(detail::serve_round(launch, stream, options.pattern, options.rate_per_s, options.round_requests,
                                             round_seed++));
        const detail::serving_round& last = rounds.back();
        engine::round_result sample;
        sample.sample_s = summarize(last.latency_s).median;
        for (double s : last.service_s) sample.gpu_s += s;
        return sample;
      },
      measuring, false);
  // The warm-up's rounds came first; what follows them was measured.
  const std::size_t warm = std::min(rounds.size(), r.rounds.warmup_launches);
  std::vector<double> service;
  double span = 0;
  for (std::size_t i = warm; i < rounds.size(); ++i) {
    r.latencies_s.insert(r.latencies_s.end(), rounds[i].latency_s.begin(), rounds[i].latency_s.end());
    service.insert(service.end(), rounds[i].service_s.begin(), rounds[i].service_s.end());
    span += rounds[i].span_s;
  }
  if (!r.latencies_s.empty()) {
    r.latency = summarize_latencies(r.latencies_s);
    r.service = summarize_latencies(service);
  }
  r.achieved_per_s = span > 0 ? double(r.latencies_s.size()) / span : 0.0;
  r.offered_per_s = options.pattern == arrival_pattern::closed_loop ? r.achieved_per_s : options.rate_per_s;
  return r;
}

/// serve() timed through the process's engine of the current device (options checked first).
template <class Launch>
serving_result serve(Launch&& launch, const serving_options& options) {
  options.validate();
  return serve(std::forward<Launch>(launch), options, shared_engine());
}

}  // namespace gpucmp
