// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Projection onto a GPU you don't have: a roofline with efficiency carried over from the
// GPU the result was measured on,
//     time = max(FLOPs / (peak_target x e_c), bytes / (bandwidth_target x e_m)),
// where the efficiency of the ceiling that bound the measurement is the measurement's own
// (achieved / datasheet on the measured GPU) and the other comes from the same run's best
// result of that kind (or a documented default). A projection is an estimate, labelled as one.
#pragma once

#include <gpucmp/specs/roofline.hpp>
#include <gpucmp/specs/specs.hpp>
#include <gpucmp/specs/work.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace gpucmp {

/// Fractions of datasheet peak the measured GPU reached, used for the ceiling that did not
/// bind a result. Defaults: 0.85 of bandwidth (SM copy kernels reach 85-90 %, published
/// STREAM results) and 0.80 of compute (large cuBLAS GEMMs reach about 80 %).
struct efficiency {
  double compute = 0.80;  ///< achieved / peak FLOP/s
  double memory = 0.85;   ///< achieved / peak bandwidth
};

/// What a projection says.
enum class projection_status {
  projected,    ///< seconds holds the estimate
  unsupported,  ///< the target has no peak for the precision (e.g. FP8 on an A100)
  oom,          ///< the bytes the work touches exceed the target's memory
  no_model,     ///< no work declared, or the measured GPU lacks the figures to derive efficiency
  latency_bound,  ///< measured in under latency_bound_below_s: the launch, not a datasheet ceiling, bounds it
};

/// Results measured faster than this per launch are not projected: a launch's fixed cost
/// (2 µs hot, 4 µs cold for an empty-sized kernel on the H200, the README's spin table) is a
/// fifth or more of such a time, and no datasheet figure scales it. Projected anyway, a 65536
/// element saxpy measured at 4 µs on an H200 came out at 0.54 µs on an A100 (DRAM bandwidth
/// alone), a GPU with less bandwidth and no shorter launch.
inline constexpr double latency_bound_below_s = 10e-6;

/// The projection's measured error: projected from the H200's suite onto GPUs with published
/// results of the same operation, the mean and the largest absolute error
/// (scripts/projection-error.py, results/h200/projection_error.md; a test keeps these the
/// same as that file). The report draws this band around every projected figure.
inline constexpr double projection_mean_abs_error = 0.096;
inline constexpr double projection_largest_abs_error = 0.212;  ///< see projection_mean_abs_error

/// "projected", "unsupported", "oom", "no model", "latency-bound".
inline const char* to_string(projection_status s) noexcept {
  switch (s) {
    case projection_status::projected: return "projected";
    case projection_status::unsupported: return "unsupported";
    case projection_status::oom: return "oom";
    case projection_status::no_model: return "no model";
    case projection_status::latency_bound: return "latency-bound";
  }
  return "unknown";
}

/// A projected result.
struct projection {
  projection_status status = projection_status::no_model;  ///< whether seconds is meaningful
  double seconds = no_value;     ///< projected time per launch
  double compute_s = no_value;   ///< FLOPs / (target peak x e_c)
  double memory_s = no_value;    ///< bytes / (target bandwidth x e_m)
  efficiency used;               ///< the efficiencies applied
  std::string reason;            ///< why, when not projected (or a caveat of a projection)
  bool from_l2_resident = false; ///< the measurement's bytes fit in L2: projected with DRAM bandwidth instead
};

/// Projects `w`, measured in `measured_s` on `measured_on`, onto `target`. `elsewhere` gives
/// the efficiency of the ceiling that did not bind the measurement.
inline projection project(const work& w, double measured_s, const gpu_profile& measured_on, const gpu_profile& target,
                          const efficiency& elsewhere = {}) {
  w.validate();
  projection out;
  out.used = elsewhere;
  if (!(measured_s > 0) || (w.flops <= 0 && w.bytes() <= 0)) {
    out.reason = "no work declared";
    return out;
  }
  if (measured_s < latency_bound_below_s) {
    char text[160];
    std::snprintf(text, sizeof text, "%.3g us a launch: launch latency, not a datasheet ceiling, bounds it (under %g us is not projected)",
                  measured_s * 1e6, latency_bound_below_s * 1e6);
    out.status = projection_status::latency_bound;
    out.reason = text;
    return out;
  }
  if (w.flops > 0 && w.arithmetic != precision::none && !target.supports(w.arithmetic, w.structure)) {
    out.status = projection_status::unsupported;
    out.reason = std::string(to_string(w.arithmetic)) + (w.structure == sparsity::dense ? "" : " 2:4 sparse") +
                 " has no peak on " + target.name;
    return out;
  }
  if (std::isfinite(target.memory_gb) && w.bytes() > target.memory_gb * 1e9) {
    out.status = projection_status::oom;
    out.reason = "touches more bytes than the " + target.name + "'s memory";
    return out;
  }
  const roofline_point here = place_on_roofline(w, measured_s, measured_on);
  const bool has_flops = w.flops > 0 && w.arithmetic != precision::none;
  if (here.bound == roofline_bound::compute && std::isfinite(here.fraction_of_peak_compute)) {
    out.used.compute = here.fraction_of_peak_compute;
  } else if (here.bound == roofline_bound::memory && here.fits_in_l2) {
    // Served from L2 on the measured GPU: its bandwidth says nothing about DRAM, so the
    // projection uses the DRAM efficiency and says so.
    out.reason = "L2-resident when measured: projected with DRAM bandwidth";
    out.from_l2_resident = true;
  } else if (here.bound == roofline_bound::memory && std::isfinite(here.fraction_of_peak_bandwidth)) {
    out.used.memory = here.fraction_of_peak_bandwidth;
  } else {
    out.reason = "the measured GPU's datasheet lacks the figures to place this result";
    return out;
  }
  out.compute_s = has_flops ? w.flops / (target.peak_per_s(w.arithmetic, w.structure) * out.used.compute) : 0.0;
  out.memory_s = w.bytes() > 0 ? w.bytes() / (target.bandwidth_bytes_per_s() * out.used.memory) : 0.0;
  if (!std::isfinite(out.compute_s) || !std::isfinite(out.memory_s)) {
    out.reason = "the target's datasheet lacks the figures for this result";
    return out;
  }
  out.seconds = std::max(out.compute_s, out.memory_s);
  out.status = projection_status::projected;
  return out;
}

}  // namespace gpucmp
