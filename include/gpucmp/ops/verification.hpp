// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What "correct" means for an operation's output, and the record of a check. An output is
// compared with a reference computed in double from the same (already rounded) inputs; the
// allowed error is a probabilistic rounding bound (Higham & Mary, "A new approach to
// probabilistic rounding error analysis", 2019): independent roundings of L terms grow like
// sqrt(L), not L, so the bound is tight enough to catch wrong answers and loose enough never
// to flag a correct one. Host-only; the comparison itself runs on the host.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace gpucmp {

/// Rounding units of one operation's arithmetic (relative errors; 0 where exact).
struct tolerance {
  double output_eps = 0;       ///< rounding of the stored result (2^-11 for FP16)
  double input_eps = 0;        ///< rounding of each product's inputs inside the unit (TF32: 2^-10 each)
  double accumulate_eps = 0;   ///< rounding of each addition of the accumulator
  double transform_eps = 0;    ///< extra error of transform algorithms (Winograd, FFT), per term
  double output_abs = 0;       ///< absolute rounding of a stored result near zero (half the smallest subnormal)
  double sigmas = 8;           ///< how many standard deviations of the rounding model are allowed

  /// The allowed |got - reference| for one output: `reference` is the exact value, `l2` the
  /// root of the sum of squared products (the scale of random rounding errors), `terms`
  /// the length of the reduction.
  double bound(double reference, double l2, double terms) const noexcept {
    const double per_term = input_eps + transform_eps + accumulate_eps * std::sqrt(terms);
    return output_eps * std::fabs(reference) + output_abs + sigmas * per_term * l2 + 1e-300;
  }

  /// As bound(), for a pass that adds its own result `own` to a prior output (reference =
  /// own + prior). Its epilogue may round `own` to the output type before the addition, as a
  /// separate addition would (cuDNN's backward-data at batch 2628 does): one more rounding,
  /// of |own|, which cancellation with the prior can make far larger than |reference|.
  double bound_added(double reference, double own, double l2, double terms) const noexcept {
    return bound(reference, l2, terms) + output_eps * std::fabs(own);
  }
};

/// The outcome of checking an output against a reference.
struct verification {
  std::string method;          ///< how it was checked ("CPU double reference, all 4096 outputs")
  std::size_t checked = 0;     ///< outputs compared
  std::size_t failed = 0;      ///< outputs outside their bound (NaN or never written included)
  double worst_ratio = 0;      ///< largest |error| / bound seen (<= 1 when passed)
  std::string worst_where;     ///< where the worst output is ("batch 0, row 5, column 7")
  double worst_got = 0;        ///< its value
  double worst_reference = 0;  ///< its reference
  double worst_bound = 0;      ///< its bound

  /// True when outputs were checked and all were within their bounds.
  bool passed() const noexcept { return checked > 0 && failed == 0; }

  /// Folds one output's comparison in; returns true when it is within `bound`.
  bool add(double got, double reference, double bound, const std::string& where_if_worst) {
    return add_at(got, reference, bound, [&] { return where_if_worst; });
  }

  /// add(), naming the place with `where()` only when it is the worst so far (a check of
  /// millions of outputs builds no string for each).
  template <class Where>
  bool add_at(double got, double reference, double bound, Where&& where) {
    ++checked;
    const double err = std::fabs(got - reference);
    const bool ok = err <= bound;  // false for NaN
    if (!ok) ++failed;
    const double ratio = std::isnan(err) ? INFINITY : err / bound;
    if (checked == 1 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_where = where();
      worst_got = got;
      worst_reference = reference;
      worst_bound = bound;
    }
    return ok;
  }

  /// One line: "passed: 262144 outputs (method), worst error 0.12 of its bound" or the failure.
  std::string summary() const {
    std::ostringstream s;
    s.precision(7);
    if (passed()) {
      s << "passed: " << checked << " outputs (" << method << "), worst error " << worst_ratio << " of its bound";
    } else if (checked == 0) {
      s << "nothing was checked (" << method << ")";
    } else {
      s << failed << " of " << checked << " outputs outside tolerance (" << method << "); worst at " << worst_where
        << ": got " << worst_got << ", reference " << worst_reference << ", allowed error " << worst_bound;
    }
    return s.str();
  }
};

/// An operation's output did not match its reference: it is reported as failed, never timed.
class verification_failed : public error {
 public:
  verification_failed(const std::string& operation, const verification& v)
      : error("verification failed: " + operation + ": " + v.summary()), m_result(v) {}
  /// The check's record.
  const verification& result() const noexcept { return m_result; }

 private:
  verification m_result;
};

/// Throws verification_failed unless `v` passed.
inline void require_passed(const std::string& operation, const verification& v) {
  if (!v.passed()) throw verification_failed(operation, v);
}

}  // namespace gpucmp
