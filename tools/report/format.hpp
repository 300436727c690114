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

/// A byte count in binary units: "16 MiB", "4 GiB", "1.5 KiB", "512 B".
inline std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  return (bytes == std::floor(bytes) ? fixed(bytes, 0) : number(bytes)) + " " + units[u];
}

/// A large count with an SI prefix and three significant figures: "9.26 M", "740 k", "512".
inline std::string count_text(double v) {
  const double a = std::fabs(v);
  if (a >= 1e12) return number(v / 1e12) + " T";
  if (a >= 1e9) return number(v / 1e9) + " G";
  if (a >= 1e6) return number(v / 1e6) + " M";
  if (a >= 1e4) return number(v / 1e3) + " k";
  return number(v);
}

/// A number for CSV: six significant digits, "" when not finite.
inline std::string csv_number(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
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
