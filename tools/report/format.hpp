// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How the report writes numbers and escapes text, the same in every renderer.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace gpucmp_report {

inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// Three significant figures at most, without exponent for the ranges reports use.
inline std::string number(double v) {
  if (!std::isfinite(v)) return "";
  const double a = std::fabs(v);
  if (a >= 100) return fixed(v, 0);
  if (a >= 10) return fixed(v, 1);
  if (a >= 1) return fixed(v, 2);
  return fixed(v, 3);
}

/// A parameter's value as written: whole numbers in full ("1073741824", "0"), others with
/// up to 6 significant digits.
inline std::string parameter_number(double v) {
  char buf[32];
  if (std::fabs(v) < 1e15 && v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

inline std::string html_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

}  // namespace gpucmp_report
