// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where a measured result sits against a GPU's datasheet peaks: achieved rates, % of the
// peak for its precision, arithmetic intensity, which roofline ceiling binds, and whether its
// working set fits in L2 (then the bandwidth is L2's, not DRAM's). Host-only arithmetic.
#pragma once

#include <gpucmp/specs/specs.hpp>
#include <gpucmp/specs/work.hpp>

#include <cmath>
#include <string>

namespace gpucmp {

/// Which ceiling of the roofline limits a result.
enum class roofline_bound {
  compute,  ///< FLOPs over the precision's peak take longer than bytes over bandwidth
  memory,   ///< bytes over bandwidth take longer
  unknown,  ///< not enough declared work or datasheet figures to say
};

/// "compute", "memory", "unknown".
inline const char* to_string(roofline_bound b) noexcept {
  switch (b) {
    case roofline_bound::compute: return "compute";
    case roofline_bound::memory: return "memory";
    case roofline_bound::unknown: return "unknown";
  }
  return "unknown";
}

/// A result placed on a GPU's roofline. NaN marks what cannot be computed.
struct roofline_point {
  double flop_per_s = no_value;            ///< achieved FLOP/s
  double bytes_per_s = no_value;           ///< achieved bytes (read + written) per second
  double fraction_of_peak_compute = no_value;    ///< achieved / datasheet peak for the precision
  double fraction_of_peak_bandwidth = no_value;  ///< achieved / datasheet bandwidth
  double arithmetic_intensity = no_value;  ///< FLOP per byte
  double ridge_intensity = no_value;       ///< peak / bandwidth: intensity where the ceilings meet
  roofline_bound bound = roofline_bound::unknown;  ///< the binding ceiling
  bool fits_in_l2 = false;                 ///< the bytes moved fit in L2: bandwidth figures are not DRAM's
};

/// Places `w`, done in `seconds`, on `gpu`'s roofline.
inline roofline_point place_on_roofline(const work& w, double seconds, const gpu_profile& gpu) {
  w.validate();
  roofline_point r;
  if (!(seconds > 0)) return r;
  const double peak = gpu.peak_per_s(w.arithmetic, w.structure);
  const double bandwidth = gpu.bandwidth_bytes_per_s();
  if (w.flops > 0) {
    r.flop_per_s = w.flops / seconds;
    if (std::isfinite(peak) && peak > 0) r.fraction_of_peak_compute = r.flop_per_s / peak;
  }
  if (w.bytes() > 0) {
    r.bytes_per_s = w.bytes() / seconds;
    if (std::isfinite(bandwidth) && bandwidth > 0) r.fraction_of_peak_bandwidth = r.bytes_per_s / bandwidth;
    if (std::isfinite(gpu.l2_mb)) r.fits_in_l2 = w.bytes() <= gpu.l2_mb * 1024.0 * 1024.0;
  }
  if (w.flops > 0 && w.bytes() > 0) r.arithmetic_intensity = w.flops / w.bytes();
  if (std::isfinite(peak) && std::isfinite(bandwidth) && bandwidth > 0) r.ridge_intensity = peak / bandwidth;
  const double compute_s = w.flops > 0 && std::isfinite(peak) ? w.flops / peak : 0.0;
  const double memory_s = w.bytes() > 0 && std::isfinite(bandwidth) ? w.bytes() / bandwidth : 0.0;
  if (compute_s > 0 || memory_s > 0) r.bound = compute_s >= memory_s ? roofline_bound::compute : roofline_bound::memory;
  return r;
}

}  // namespace gpucmp
