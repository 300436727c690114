// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Progress lines for the long steps that print nothing else: algorithm searches (a network
// searches every layer inside one benchmark) and model builds. The library only reports; the
// program decides where lines go: benchmark_main sends them to stderr when it is a terminal
// (--gpucmp_progress=on|off|auto), a program with its own main installs its own sink.
#pragma once

#include <functional>
#include <string>

namespace gpucmp {

/// Where progress lines go; empty: nowhere (the default).
using progress_sink = std::function<void(const std::string& line)>;

/// The process's sink (set it before running benchmarks; not thread-safe to change while
/// they run).
inline progress_sink& progress_output() {
  static progress_sink sink;
  return sink;
}

/// Sends `line` to the sink, if there is one. A sink that throws loses its line, never the
/// measurement.
inline void report_progress(const std::string& line) noexcept {
  try {
    if (const progress_sink& sink = progress_output()) sink(line);
  } catch (...) {
  }
}

}  // namespace gpucmp
