// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The typed rows of this process's runs (measure/result_schema.hpp) and the file reporter
// that writes them: Google Benchmark's own JSON, plus a "gpucmp" section that the report and
// the scripts read instead of names, labels and messages. Google Benchmark carries only
// numbers for a run it reports (and none for a skipped one), so each row is kept here and
// paired with its run when Google Benchmark reports it: by registration (the run's function
// name), and among the rows of one registration by what the run itself holds (its time, or
// its error message), so the instances of a family pair right even when
// --benchmark_enable_random_interleaving runs them out of order.
#pragma once

#include <gpucmp/io/json.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/specs/work.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

namespace detail {

/// A row measured but not yet paired with Google Benchmark's run.
struct pending_row {
  std::string registration;  ///< the name registered with Google Benchmark (the run's function name)
  result_row row;
};

/// Whether this process keeps typed rows: set where a typed reporter will claim them
/// (benchmark_main with a JSON --benchmark_out, or a program that installs
/// typed_json_reporter itself), so a process without one does not collect them.
inline bool& typed_rows_enabled() {
  static bool enabled = false;
  return enabled;
}

/// Rows not yet reported, in the order they were measured.
inline std::vector<pending_row>& pending_rows() {
  static std::vector<pending_row> rows;
  return rows;
}

/// Rows paired with their runs, in report order: the file's "gpucmp" section.
inline std::vector<result_row>& reported_rows() {
  static std::vector<result_row> rows;
  return rows;
}

// A reported run's error message ("" when it ran): Google Benchmark 1.8 renamed
// error_occurred/error_message to skipped/skip_message.
template <class Run>
auto run_error_message(const Run& run, int) -> decltype(std::string(run.skip_message)) {
  return run.skipped ? run.skip_message : std::string();
}
template <class Run>
std::string run_error_message(const Run& run, long) {
  return run.error_occurred ? run.error_message : std::string();
}

/// Keeps `row`, the outcome of the run `gb` of registration `registration`, until Google
/// Benchmark reports that run.
inline void record_row(const benchmark::State&, const std::string& registration, result_row row) {
  if (!typed_rows_enabled()) return;
  pending_rows().push_back({registration, std::move(row)});
}

/// The row of a run that ended before (or without) a measurement.
inline result_row unmeasured_row(mode m, result_status status, const std::string& message) {
  result_row row;
  row.timing_mode = m;
  row.status = status;
  row.message = message;
  return row;
}

/// Marks the last row of `registration` failed (a fixture's TearDown threw after the run).
inline void mark_last_row_failed(const std::string& registration, const std::string& message) {
  auto& rows = pending_rows();
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (it->registration == registration) {
      it->row.status = result_status::failed;
      it->row.message = message;
      return;
    }
  }
}

/// The row of a finished measurement with the declared work and what the benchmark described.
inline result_row measured_row(const measurement& r, const work& declared, const row_description& described = {}) {
  result_row row;
  row.described = described;
  row.timing_mode = r.timing_mode;
  row.status = r.status;
  row.message = r.message;
  row.declared = declared;
  row.has_flops = declared.flops > 0;
  row.has_bytes = declared.bytes() > 0;
  row.has_items = declared.items > 0;
  if (r.ok()) {
    row.seconds = r.gpu.median;
    row.seconds_min = r.gpu.min;
    row.seconds_max = r.gpu.max;
    row.noise = r.gpu.relative_noise;
    row.samples = std::int64_t(r.gpu.count);
    row.batch = std::int64_t(r.batch);
    row.sample_seconds = written_samples(r.gpu_s);
    if (r.power) {
      row_power p;
      p.average_w = r.power->average_w;
      p.peak_w = r.power->peak_w;
      p.energy_j = r.power->energy_j;
      p.limit_w = r.power->power_limit_w;
      p.throttled_fraction = r.power->samples > 0 ? double(r.power->throttled_samples) / double(r.power->samples) : 0.0;
      row.power = p;
    }
    if (r.kernels) {
      for (const auto& k : r.kernels->kernels) row.kernels.push_back(k.name);
    }
  }
  return row;
}

/// Whether pending row `p` holds what Google Benchmark reported for `run`: its time (the
/// adapter reports the median as the manual time of its one iteration) or its message.
inline bool row_matches(const pending_row& p, const benchmark::BenchmarkReporter::Run& run) {
  const std::string error = run_error_message(run, 0);
  if (!error.empty()) return !p.row.ok() && p.row.message == error;
  return p.row.ok() && run.iterations > 0 &&
         p.row.seconds == run.real_accumulated_time / static_cast<double>(run.iterations);
}

/// Pairs the pending rows of the runs in `runs` (one benchmark instance: its repetitions,
/// or only their aggregates under --benchmark_report_aggregates_only) with those runs.
inline void claim_rows(const std::vector<benchmark::BenchmarkReporter::Run>& runs, std::set<std::string>& claimed) {
  if (runs.empty()) return;
  const auto& first = runs.front();
  const std::string instance = first.run_name.str();
  if (claimed.count(instance)) return;  // its repetitions came first; these are its aggregates
  claimed.insert(instance);
  const std::string& registration = first.run_name.function_name;
  const std::string benchmark = registration + (first.run_name.args.empty() ? "" : "/" + first.run_name.args);
  auto& pending = pending_rows();
  auto take = [&](std::vector<pending_row>::iterator it, std::int64_t repetition) {
    result_row row = std::move(it->row);
    row.name = instance;
    row.benchmark = benchmark;
    row.repetition_index = std::max<std::int64_t>(0, repetition);
    reported_rows().push_back(std::move(row));
    pending.erase(it);
  };
  auto first_of_registration = [&]() {
    return std::find_if(pending.begin(), pending.end(), [&](const pending_row& p) { return p.registration == registration; });
  };
  bool any_iteration = false;
  for (const auto& run : runs) {
    if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration) continue;
    any_iteration = true;
    auto it = std::find_if(pending.begin(), pending.end(),
                           [&](const pending_row& p) { return p.registration == registration && row_matches(p, run); });
    if (it == pending.end()) it = first_of_registration();  // a row Google Benchmark reports otherwise
    if (it != pending.end()) take(it, run.repetition_index);
  }
  if (!any_iteration) {  // aggregates only: they stand for every repetition, in run order
    for (std::int64_t i = 0; i < first.repetitions; ++i) {
      const auto it = first_of_registration();
      if (it == pending.end()) break;
      take(it, i);
    }
  }
}

}  // namespace detail

/// Google Benchmark's JSON file reporter, plus the typed rows: the file it writes is a
/// Google Benchmark JSON file (its tools read it as before) with one more top-level member,
/// "gpucmp": {"schema_version", "results"} (docs/results-format.md).
class typed_json_reporter : public benchmark::JSONReporter {
 public:
  typed_json_reporter() { detail::typed_rows_enabled() = true; }

  void ReportRuns(const std::vector<Run>& runs) override {
    detail::claim_rows(runs, m_claimed);
    JSONReporter::ReportRuns(runs);
  }

  // JSONReporter::Finalize writes "\n  ]\n}\n" (every release from 1.7 to main): the list is
  // closed here the same way, and the section goes in before the object closes.
  void Finalize() override {
    GetOutputStream() << "\n  ],\n  \"gpucmp\": "
                      << detail::to_json_text(results_section(detail::reported_rows()), 2, 1) << "\n}\n";
  }

 private:
  std::set<std::string> m_claimed;
};

namespace detail {

/// The value of Google Benchmark flag `flag` ("benchmark_out") on the command line
/// (--flag=value), else in its environment variable (BENCHMARK_OUT), else `fallback`.
inline std::string gbench_flag_value(int argc, char** argv, const std::string& flag, const std::string& fallback) {
  const std::string prefix = "--" + flag + "=";
  std::string value;
  bool seen = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) {
      value = arg.substr(prefix.size());  // the last one wins, as in Google Benchmark
      seen = true;
    }
  }
  if (seen) return value;
  std::string env;
  for (char c : flag) env += char(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  if (const char* v = std::getenv(env.c_str())) return v;
  return fallback;
}

/// True when this command line writes a JSON result file (--benchmark_out with the default
/// or an explicit json format): then the typed reporter writes it.
inline bool writes_json_results(int argc, char** argv) {
  return !gbench_flag_value(argc, argv, "benchmark_out", "").empty() &&
         gbench_flag_value(argc, argv, "benchmark_out_format", "json") == "json";
}

}  // namespace detail

}  // namespace gpucmp
