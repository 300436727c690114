// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The stopping rule, separate from any GPU so it can be tested on synthetic samples.
// Samples are added one at a time; the rule keeps running statistics (Welford) so each
// decision costs O(1).
#pragma once

#include <gpucmp/measure/options.hpp>

#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

namespace gpucmp {

/// Why sampling stopped.
enum class stop_reason {
  converged,      ///< minimums met and relative noise at or below the target
  noise_plateau,  ///< minimums met; noise above target but no longer falling (irreducible)
  wall_time_cap,  ///< max_wall_time_s reached
  max_samples,    ///< max_samples reached
  fixed_window,   ///< min_samples taken and window_s of GPU time measured (noise not consulted)
};

/// "converged", "noise_plateau", "wall_time_cap", "max_samples", "fixed_window".
inline const char* to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::converged: return "converged";
    case stop_reason::noise_plateau: return "noise_plateau";
    case stop_reason::wall_time_cap: return "wall_time_cap";
    case stop_reason::max_samples: return "max_samples";
    case stop_reason::fixed_window: return "fixed_window";
  }
  return "unknown";
}

/// Decides when a measurement has enough samples.
class stopping_rule {
 public:
  /// Relative change of the noise estimate between n/2 and n samples under which it counts as settled.
  static constexpr double plateau_tolerance = 0.10;
  /// Plateau detection needs this many times min_samples, so the half-way estimate is meaningful.
  static constexpr std::size_t plateau_min_factor = 4;

  /// Validates `options` and keeps a copy.
  explicit stopping_rule(const measure_options& options) : m_options(options) { m_options.validate(); }

  /// Adds one sample (seconds of GPU time per launch) covering `gpu_time_s` of GPU time.
  void add(double sample_s, double gpu_time_s) {
    ++m_count;
    const double delta = sample_s - m_mean;
    m_mean += delta / static_cast<double>(m_count);
    m_m2 += delta * (sample_s - m_mean);
    m_gpu_time_s += gpu_time_s;
    m_noise_history.push_back(relative_noise());
  }

  /// Samples added so far.
  std::size_t count() const noexcept { return m_count; }
  /// Total GPU time added so far.
  double gpu_time_s() const noexcept { return m_gpu_time_s; }
  /// Current relative noise (stddev / mean); 0 with fewer than two samples.
  double relative_noise() const noexcept {
    if (m_count < 2 || m_mean == 0.0) return 0.0;
    return std::sqrt(m_m2 / static_cast<double>(m_count - 1)) / std::fabs(m_mean);
  }

  /// The reason to stop now, or nothing to go on; `wall_elapsed_s` is the sampling loop's wall time.
  std::optional<stop_reason> check(double wall_elapsed_s) const {
    if (m_count >= m_options.max_samples) return stop_reason::max_samples;
    if (m_count >= 1 && wall_elapsed_s >= m_options.max_wall_time_s) return stop_reason::wall_time_cap;
    if (m_options.window_s > 0) {
      if (m_count >= m_options.min_samples && m_gpu_time_s >= m_options.window_s) return stop_reason::fixed_window;
      return std::nullopt;
    }
    if (m_count < m_options.min_samples || m_gpu_time_s < m_options.min_gpu_time_s) return std::nullopt;
    const double noise = relative_noise();
    if (noise <= m_options.target_noise) return stop_reason::converged;
    if (m_count >= plateau_min_factor * m_options.min_samples) {
      const double halfway = m_noise_history[m_count / 2 - 1];
      if (std::fabs(noise - halfway) <= plateau_tolerance * noise) return stop_reason::noise_plateau;
    }
    return std::nullopt;
  }

 private:
  measure_options m_options;
  std::size_t m_count = 0;
  double m_mean = 0;
  double m_m2 = 0;
  double m_gpu_time_s = 0;
  std::vector<double> m_noise_history;
};

}  // namespace gpucmp
