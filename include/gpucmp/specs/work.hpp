// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Work a benchmark declares (FLOPs, bytes, items) and the rates derived from it. Users
// declare the work once; gpucmp computes every rate, so no printer does arithmetic.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/specs/specs_types.hpp>

#include <cmath>
#include <string>

namespace gpucmp {

/// Work done by one launch of a measured callable.
struct work {
  double flops = 0;          ///< floating-point (or integer multiply-add) operations
  double bytes_read = 0;     ///< bytes that must be read from device memory
  double bytes_written = 0;  ///< bytes that must be written to device memory
  double items = 0;          ///< domain items (elements, images, tokens, ...)
  precision arithmetic = precision::none;  ///< the precision the FLOPs run in (selects the peak for % of peak)
  sparsity structure = sparsity::dense;    ///< 2:4 selects the datasheet's sparse peak; flops stay the dense count

  /// Bytes read plus bytes written.
  double bytes() const noexcept { return bytes_read + bytes_written; }
  /// True when nothing was declared.
  bool empty() const noexcept { return flops == 0 && bytes_read == 0 && bytes_written == 0 && items == 0; }

  /// Throws invalid_argument naming a negative or non-finite field.
  void validate() const {
    auto check = [](double v, const char* name) {
      if (!std::isfinite(v) || v < 0) throw invalid_argument(std::string("work.") + name + " must be finite and >= 0");
    };
    check(flops, "flops");
    check(bytes_read, "bytes_read");
    check(bytes_written, "bytes_written");
    check(items, "items");
  }
};

/// Rates of `work` done in `seconds`.
struct rates {
  double flop_per_s = 0;   ///< FLOP/s
  double bytes_per_s = 0;  ///< bytes read + written per second
  double items_per_s = 0;  ///< items per second
};

/// The rates at which `w` is done in `seconds` (> 0).
inline rates rates_for(const work& w, double seconds) {
  w.validate();
  if (!(seconds > 0) || !std::isfinite(seconds)) throw invalid_argument("rates_for: seconds must be finite and > 0");
  return {w.flops / seconds, w.bytes() / seconds, w.items / seconds};
}

}  // namespace gpucmp
