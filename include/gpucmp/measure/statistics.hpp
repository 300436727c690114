// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Summary statistics of a sample set. Pure host code, no CUDA: the stopping rule and every
// reporter use the same numbers.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace gpucmp {

/// Summary of a set of samples (in the samples' unit; gpucmp uses seconds).
struct summary {
  std::size_t count = 0;     ///< number of samples
  double mean = 0;           ///< arithmetic mean
  double stddev = 0;         ///< sample standard deviation (n - 1); 0 for one sample
  double min = 0;            ///< smallest sample
  double max = 0;            ///< largest sample
  double median = 0;         ///< 50th percentile
  double p10 = 0;            ///< 10th percentile
  double p90 = 0;            ///< 90th percentile
  double p99 = 0;            ///< 99th percentile
  double relative_noise = 0; ///< stddev / mean: the spread the stopping rule drives down
};

/// The q-quantile (0 <= q <= 1) of already sorted values, linearly interpolated between
/// closest ranks (the "type 7" definition of R and NumPy).
inline double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw invalid_argument("quantile of an empty sample set");
  if (!(q >= 0.0 && q <= 1.0)) throw invalid_argument("quantile q must lie in [0, 1]");
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

/// At most `most` (>= 2) of `samples`, evenly spaced over them (the first and the last kept), so
/// that a drift during a long run keeps its share.
inline std::vector<double> evenly_spaced(const std::vector<double>& samples, std::size_t most) {
  if (samples.size() <= most) return samples;
  if (most < 2) throw invalid_argument("evenly_spaced keeps at least 2 samples");
  std::vector<double> out;
  out.reserve(most);
  const double step = double(samples.size() - 1) / double(most - 1);
  for (std::size_t i = 0; i < most; ++i) out.push_back(samples[std::size_t(std::llround(double(i) * step))]);
  return out;
}

/// Summarises `samples`; throws invalid_argument when empty or when a sample is not finite.
inline summary summarize(std::vector<double> samples) {
  if (samples.empty()) throw invalid_argument("cannot summarise an empty sample set");
  for (double s : samples) {
    if (!std::isfinite(s)) throw invalid_argument("sample set contains a non-finite value");
  }
  std::sort(samples.begin(), samples.end());
  summary out;
  out.count = samples.size();
  out.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(out.count);
  if (out.count > 1) {
    double squares = 0;
    for (double s : samples) squares += (s - out.mean) * (s - out.mean);
    out.stddev = std::sqrt(squares / static_cast<double>(out.count - 1));
  }
  out.min = samples.front();
  out.max = samples.back();
  out.median = quantile_sorted(samples, 0.5);
  out.p10 = quantile_sorted(samples, 0.10);
  out.p90 = quantile_sorted(samples, 0.90);
  out.p99 = quantile_sorted(samples, 0.99);
  out.relative_noise = out.mean != 0 ? out.stddev / std::fabs(out.mean) : 0.0;
  return out;
}

}  // namespace gpucmp
