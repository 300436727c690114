// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// For the adapter's tests: run registered benchmarks through RunSpecifiedBenchmarks and keep
// what Google Benchmark reports of each run (error, time, counters, label).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp_test {

// Google Benchmark 1.8 replaced Run::error_occurred/error_message with skipped/skip_message.
template <class R, class = void>
struct has_skipped : std::false_type {};
template <class R>
struct has_skipped<R, std::void_t<decltype(std::declval<R>().skip_message)>> : std::true_type {};

template <class R>
std::string error_of(const R& run) {
  if constexpr (has_skipped<R>::value) {
    return run.skipped ? run.skip_message : "";
  } else {
    return run.error_occurred ? run.error_message : "";
  }
}

struct captured_run {
  std::string error;
  double seconds_per_iteration = 0;
  std::map<std::string, double> counters;
  std::string label;
};

class capture_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      captured_run c;
      c.error = error_of(r);
      if (r.iterations > 0) c.seconds_per_iteration = r.real_accumulated_time / static_cast<double>(r.iterations);
      for (const auto& [name, counter] : r.counters) c.counters[name] = counter.value;
      c.label = r.report_label;
      runs_by_name[r.benchmark_name()] = c;
    }
  }
  std::map<std::string, captured_run> runs_by_name;
};

inline std::map<std::string, captured_run> run_matching(const std::string& filter) {
  capture_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter, filter);
  return reporter.runs_by_name;
}

}  // namespace gpucmp_test
