// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The typed rows of this process's runs (measure/result_schema.hpp) and the file reporter
// that writes them: Google Benchmark's own JSON, plus a "gpucmp" section that the report and
// the scripts read instead of names, labels and messages. Google Benchmark carries only
// numbers for a run it reports (and none for a skipped one), so each row is kept here and
// paired with its run when Google Benchmark reports it.
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
  std::string run_name;      ///< the run's full name where benchmark::State says it (1.8+), else ""
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

// benchmark::State::name() (Google Benchmark 1.8 and later): the run's exact name.
template <class State>
auto run_name_of(const State& gb, int) -> decltype(std::string(gb.name())) {
  return gb.name();
}
template <class State>
std::string run_name_of(const State&, long) {
  return "";
}

/// Keeps `row`, the outcome of the run `gb` of registration `registration`, until Google
/// Benchmark reports that run.
inline void record_row(const benchmark::State& gb, const std::string& registration, result_row row) {
  if (!typed_rows_enabled()) return;
  pending_rows().push_back({registration, run_name_of(gb, 0), std::move(row)});
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

/// The row of a finished measurement with the declared work.
inline result_row measured_row(const measurement& r, const work& declared) {
  result_row row;
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

/// Pairs the pending rows of the runs in `runs` (one benchmark instance: its repetitions,
/// or only their aggregates under --benchmark_report_aggregates_only) with those runs.
/// Where Google Benchmark predates State::name(), rows pair by registration in run order.
inline void claim_rows(const std::vector<benchmark::BenchmarkReporter::Run>& runs, std::set<std::string>& claimed) {
  if (runs.empty()) return;
  const auto& first = runs.front();
  const std::string instance = first.run_name.str();
  if (claimed.count(instance)) return;  // its repetitions came first; these are its aggregates
  std::vector<std::int64_t> repetitions;
  for (const auto& run : runs) {
    if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration) repetitions.push_back(run.repetition_index);
  }
  if (repetitions.empty()) {  // aggregates only: they stand for every repetition
    for (std::int64_t i = 0; i < first.repetitions; ++i) repetitions.push_back(i);
  }
  claimed.insert(instance);
  const std::string benchmark =
      first.run_name.function_name + (first.run_name.args.empty() ? "" : "/" + first.run_name.args);
  auto& pending = pending_rows();
  std::size_t next = 0;
  for (auto it = pending.begin(); it != pending.end() && next < repetitions.size();) {
    const bool ours = it->run_name.empty() ? it->registration == first.run_name.function_name : it->run_name == instance;
    if (!ours) {
      ++it;
      continue;
    }
    result_row row = std::move(it->row);
    row.name = instance;
    row.benchmark = benchmark;
    row.repetition_index = std::max<std::int64_t>(0, repetitions[next]);
    ++next;
    reported_rows().push_back(std::move(row));
    it = pending.erase(it);
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
