// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Serving latency: single requests (a kernel, an operation, a model at some batch) issued
// with an arrival pattern, each request's latency measured from the moment it was due to
// the moment the host saw it complete — what a client of a real-time service waits. Open-
// loop patterns measure from the scheduled arrival, not from the (possibly late) issue, so a
// GPU that falls behind shows its queueing delay instead of hiding it ("coordinated
// omission"). The GPU's own time per request comes from an event pair around it.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/serving/latency.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace gpucmp {

/// How requests arrive.
struct serving_options {
  arrival_pattern pattern = arrival_pattern::closed_loop;  ///< when requests arrive
  double rate_per_s = 0;              ///< arrivals per second (fixed_rate, poisson)
  std::size_t requests = 1000;        ///< measured requests
  std::size_t warmup_requests = 20;   ///< unmeasured requests first (closed loop)
  std::uint64_t seed = 1;             ///< Poisson stream

  /// Throws invalid_argument naming the field that makes no sense.
  void validate() const {
    if (requests == 0) throw invalid_argument("serving_options: requests must be > 0");
    if (pattern != arrival_pattern::closed_loop && !(rate_per_s > 0)) {
      throw invalid_argument(std::string("serving_options: a ") + to_string(pattern) + " pattern needs rate_per_s > 0");
    }
  }
};

/// Latencies of one serving run.
struct serving_result {
  serving_options options;   ///< what was asked
  latency_summary latency;   ///< due -> seen complete by the host, seconds
  latency_summary service;   ///< GPU time of the request itself (event pair), seconds
  double offered_per_s = 0;  ///< requests per second offered (closed loop: achieved)
  double achieved_per_s = 0; ///< requests per second completed
  std::vector<double> latencies_s;  ///< every request's latency, in arrival order
};

/// Issues `options.requests` calls of `launch(stream)` as `options.pattern` says and
/// measures their latencies. `launch` must only enqueue work on the stream it is given.
template <class Launch>
serving_result serve(Launch&& launch, cudaStream_t stream, const serving_options& options) {
  options.validate();
  using clock = std::chrono::steady_clock;
  for (std::size_t i = 0; i < options.warmup_requests; ++i) launch(stream);
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));

  const std::size_t n = options.requests;
  std::vector<event> begin(n), end(n);
  std::vector<double> due(n, 0.0), done(n, 0.0);
  const std::vector<double> arrivals = arrival_times(options.pattern, options.rate_per_s, n, options.seed);
  const auto t0 = clock::now();
  auto since = [&](clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); };
  auto issue = [&](std::size_t i) {
    begin[i].record(stream);
    launch(stream);
    end[i].record(stream);
  };

  if (options.pattern == arrival_pattern::closed_loop) {
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

  serving_result r;
  r.options = options;
  r.latencies_s.resize(n);
  std::vector<double> service(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.latencies_s[i] = done[i] - due[i];
    service[i] = elapsed_s(begin[i], end[i]);
  }
  r.latency = summarize_latencies(r.latencies_s);
  r.service = summarize_latencies(service);
  const double span = done[n - 1] - due[0];
  r.achieved_per_s = span > 0 ? double(n) / span : 0.0;
  r.offered_per_s = options.pattern == arrival_pattern::closed_loop ? r.achieved_per_s : options.rate_per_s;
  return r;
}

}  // namespace gpucmp
