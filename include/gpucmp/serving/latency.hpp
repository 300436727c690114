// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Serving latency: when requests arrive (back to back, at a fixed rate, or as a Poisson
// process) and how their latencies are distributed (p50, p90, p99, p99.9, max, and jitter as
// p99 / p50). Host-only arithmetic; the serving measurement issues the requests.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/measure/statistics.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gpucmp {

/// How requests arrive.
enum class arrival_pattern {
  closed_loop,  ///< the next request is sent when the previous one has finished
  fixed_rate,   ///< one request every 1 / rate seconds
  poisson,      ///< exponential inter-arrival times with mean 1 / rate (open loop)
};

/// "closed_loop", "fixed_rate", "poisson".
inline const char* to_string(arrival_pattern p) noexcept {
  switch (p) {
    case arrival_pattern::closed_loop: return "closed_loop";
    case arrival_pattern::fixed_rate: return "fixed_rate";
    case arrival_pattern::poisson: return "poisson";
  }
  return "unknown";
}

/// Send times (seconds from the start) of `count` requests; closed_loop has none (each
/// request waits for the previous). Deterministic for a given seed.
inline std::vector<double> arrival_times(arrival_pattern pattern, double rate_per_s, std::size_t count,
                                         std::uint64_t seed = 1) {
  if (pattern == arrival_pattern::closed_loop) return {};
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s)) throw invalid_argument("arrival rate must be finite and > 0");
  std::vector<double> times(count);
  double t = 0;
  for (std::size_t i = 0; i < count; ++i) {
    times[i] = t;
    if (pattern == arrival_pattern::fixed_rate) {
      t += 1.0 / rate_per_s;
    } else {
      // Inverse transform: -ln(1 - u) / rate, with u uniform in [0, 1).
      t += -std::log1p(-unit_interval(random_bits(seed, i))) / rate_per_s;
    }
  }
  return times;
}

/// The distribution of request latencies, in seconds.
struct latency_summary {
  std::size_t count = 0;  ///< requests
  double p50 = 0;         ///< median
  double p90 = 0;         ///< 90th percentile
  double p99 = 0;         ///< 99th percentile
  double p999 = 0;        ///< 99.9th percentile
  double max = 0;         ///< slowest request
  double mean = 0;        ///< mean
  double jitter = 0;      ///< p99 / p50: how much slower the tail is than the typical request
};

/// Summarises request latencies; throws invalid_argument for an empty or non-finite set.
inline latency_summary summarize_latencies(std::vector<double> latencies_s) {
  const summary s = summarize(latencies_s);  // validates
  std::sort(latencies_s.begin(), latencies_s.end());
  latency_summary out;
  out.count = s.count;
  out.p50 = s.median;
  out.p90 = s.p90;
  out.p99 = s.p99;
  out.p999 = quantile_sorted(latencies_s, 0.999);
  out.max = s.max;
  out.mean = s.mean;
  out.jitter = s.median > 0 ? s.p99 / s.median : 0.0;
  return out;
}

}  // namespace gpucmp
