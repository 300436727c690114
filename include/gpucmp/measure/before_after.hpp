// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Whether a second set of timings of one benchmark differs from a first: the verdict of a
// before/after comparison, from the two full sample sets, never from two medians. Pure host
// code.
//
// The ratio after/before is the Hodges-Lehmann estimate (the median over every pair of
// samples of the ratio of their times), with the distribution-free interval that inverts the
// Mann-Whitney rank test. A change is called only when that whole interval lies beyond a
// threshold: the largest of a stated smallest change (2 % by default), the samples' own spread
// and, for times of a few microseconds, a smallest absolute change (0.25 µs). Two runs of one binary differ by more than their within-run noise says (clocks,
// placement, the other tenants of the host), so a rank test alone calls such runs different
// (nvbench's comparer does: its issues #316 and #319); the threshold is what keeps them SAME.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/statistics.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace gpucmp {

/// What a before/after comparison says of one benchmark.
enum class verdict {
  same,       ///< the whole interval of the ratio lies within the threshold
  faster,     ///< the whole interval lies below 1 / (1 + threshold)
  slower,     ///< the whole interval lies above 1 + threshold
  uncertain,  ///< the interval reaches past the threshold, or too few samples to say
};

/// "SAME", "FASTER", "SLOWER", "UNCERTAIN".
inline const char* to_string(verdict v) noexcept {
  switch (v) {
    case verdict::same: return "SAME";
    case verdict::faster: return "FASTER";
    case verdict::slower: return "SLOWER";
    case verdict::uncertain: return "UNCERTAIN";
  }
  return "UNKNOWN";
}

/// How a before/after comparison decides.
struct change_options {
  double min_change = 0.02;      ///< the smallest relative change called FASTER or SLOWER
  /// The smallest absolute change per launch called FASTER or SLOWER. Calibrated on the H200
  /// (lab/runs/before-after-check.sh, docs/comparisons.md): two runs of one suite moved a 5.6 µs
  /// copy by 0.18 µs (3.3 %) and every row of 20 µs or more by under 1 % (power-limited GEMMs
  /// aside, whose own spread covers them); a launch's fixed cost moves between processes.
  double min_change_s = 0.25e-6;
  double confidence = 0.99;      ///< two-sided confidence of the ratio's interval
  std::size_t min_samples = 5;   ///< fewer in either set: UNCERTAIN

  /// Throws invalid_argument naming the first value out of range.
  void validate() const {
    if (!(min_change >= 0 && min_change < 1)) throw invalid_argument("min_change must lie in [0, 1)");
    if (!(min_change_s >= 0) || !std::isfinite(min_change_s)) throw invalid_argument("min_change_s must be a finite time >= 0");
    if (!(confidence > 0.5 && confidence < 1)) throw invalid_argument("confidence must lie in (0.5, 1)");
    if (min_samples < 2) throw invalid_argument("min_samples must be at least 2");
  }
};

/// The comparison of one benchmark's samples after a change with those before it.
struct sample_change {
  verdict call = verdict::uncertain;  ///< the verdict
  double ratio = NAN;       ///< after / before, Hodges-Lehmann estimate (> 1: slower)
  double ratio_low = NAN;   ///< lower end of its interval
  double ratio_high = NAN;  ///< upper end of its interval
  double p_value = NAN;     ///< two-sided Mann-Whitney p of "the two sets come from one distribution"
  double threshold = NAN;   ///< the relative change below which the two count as the same (min_change, the
                            ///< samples' spread or min_change_s over the first set's median, the largest)
  std::string why;          ///< when uncertain: what kept it from a verdict
};

namespace detail {

/// The standard normal quantile of `p` in (0, 1), by bisection on erfc (exact to 1e-12).
inline double normal_quantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

/// Robust relative spread of positive `samples`: 1.4826 x median absolute deviation / median
/// (the standard deviation / mean of a normal set, unmoved by a few outliers).
inline double robust_relative_spread(std::vector<double> samples) {
  const double median = summarize(samples).median;
  for (double& s : samples) s = std::fabs(s - median);
  return 1.4826 * summarize(samples).median / median;
}

}  // namespace detail

/// The most samples of a set compare_samples reads (evenly spaced when more are given), so that
/// the pairs stay at four million at most.
inline constexpr std::size_t max_compared_samples = 2000;

/// Compares the per-launch times `after` with `before` (seconds, each finite and > 0; throws
/// invalid_argument otherwise). Work and memory grow with |before| x |after|: about 0.1 s and
/// 8 MB for 1000 samples each.
inline sample_change compare_samples(const std::vector<double>& all_before, const std::vector<double>& all_after,
                                     const change_options& options = {}) {
  options.validate();
  for (const auto* set : {&all_before, &all_after}) {
    for (double t : *set) {
      if (!(t > 0) || !std::isfinite(t)) throw invalid_argument("a sample time is not a finite number > 0");
    }
  }
  const std::vector<double> before = evenly_spaced(all_before, max_compared_samples);
  const std::vector<double> after = evenly_spaced(all_after, max_compared_samples);
  sample_change out;
  if (before.size() < options.min_samples || after.size() < options.min_samples) {
    out.why = std::to_string(before.size()) + " samples before and " + std::to_string(after.size()) +
              " after: fewer than " + std::to_string(options.min_samples) + " in a set";
    return out;
  }
  out.threshold = std::max({options.min_change, detail::robust_relative_spread(before), detail::robust_relative_spread(after),
                            options.min_change_s / summarize(before).median});

  // Every pairwise difference of log times: its median is the log of the ratio's estimate, its
  // order statistics the interval, and its signs the Mann-Whitney statistic.
  std::vector<double> diffs;
  diffs.reserve(before.size() * after.size());
  for (double b : before) {
    const double lb = std::log(b);
    for (double a : after) diffs.push_back(std::log(a) - lb);
  }
  std::sort(diffs.begin(), diffs.end());
  const double pairs = double(diffs.size());
  const std::size_t half = diffs.size() / 2;
  const double median = diffs.size() % 2 == 1 ? diffs[half] : 0.5 * (diffs[half - 1] + diffs[half]);
  out.ratio = std::exp(median);

  // Mann-Whitney U of "after is slower", with ties counted half and the tie-corrected variance.
  const double greater = double(diffs.end() - std::upper_bound(diffs.begin(), diffs.end(), 0.0));
  const double ties = double(std::upper_bound(diffs.begin(), diffs.end(), 0.0) - std::lower_bound(diffs.begin(), diffs.end(), 0.0));
  const double u = greater + 0.5 * ties;
  const double n = double(before.size()), m = double(after.size()), total = n + m;
  std::vector<double> pooled(before);
  pooled.insert(pooled.end(), after.begin(), after.end());
  std::sort(pooled.begin(), pooled.end());
  double tie_term = 0;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j] == pooled[i]) ++j;
    const double t = double(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double variance = n * m / 12.0 * ((total + 1) - tie_term / (total * (total - 1)));
  if (variance > 0) {
    const double z = std::max(0.0, std::fabs(u - pairs / 2) - 0.5) / std::sqrt(variance);
    out.p_value = std::erfc(z / std::sqrt(2.0));
  } else {
    out.p_value = 1;  // every sample the same time
  }

  // The interval: the K-th smallest and K-th largest difference, K from the normal
  // approximation of U's distribution at the stated confidence.
  const double z = detail::normal_quantile(0.5 + options.confidence / 2);
  const double k = std::floor(pairs / 2 - z * std::sqrt(n * m * (total + 1) / 12.0));
  if (k < 1) {
    out.why = "too few samples for a " + std::to_string(int(std::lround(options.confidence * 100))) + " % interval";
    return out;
  }
  out.ratio_low = std::exp(diffs[std::size_t(k) - 1]);
  out.ratio_high = std::exp(diffs[diffs.size() - std::size_t(k)]);

  const double above = 1 + out.threshold, below = 1 / above;
  if (out.ratio_low > above) {
    out.call = verdict::slower;
  } else if (out.ratio_high < below) {
    out.call = verdict::faster;
  } else if (out.ratio_low >= below && out.ratio_high <= above) {
    out.call = verdict::same;
  } else {
    out.why = "the interval reaches past the threshold";
  }
  return out;
}

}  // namespace gpucmp
