// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp::benchmark_main and GPUCMP_BENCHMARK_MAIN: flags, context, the run, the exit status.
#pragma once

#include <gpucmp/gbench/context.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/output_files.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/registration.hpp>
#include <gpucmp/gbench/result_rows.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace gpucmp {

/// A complete main: parses Google Benchmark flags (plus --gpucmp_power, which records power,
/// energy and perf/W for every benchmark, --gpucmp_batch=N, which times N launches per
/// sample everywhere, --gpucmp_cooldown_s=X, which idles X seconds before every warm-up,
/// --gpucmp_warmup_s=X and --gpucmp_window_s=X, which fix every warm-up's minimum time and
/// every sampling window (GPU seconds),
/// --gpucmp_kernels_out=FILE, which writes every kernel-mode breakdown as JSON, and
/// --gpucmp_search_log=FILE, which starts FILE anew and appends every search run_verified
/// runs as one JSON line), adds the context, runs the registered benchmarks and returns an exit_status (77
/// when there is no CUDA device).
inline int benchmark_main(int argc, char** argv) {
  const detail::gpucmp_flags flags = detail::take_gpucmp_flags(argc, argv);
  if (!flags.error.empty()) {
    std::fprintf(stderr, "gpucmp: %s\n", flags.error.c_str());
    return exit_failures;
  }
  detail::flags_everywhere() = flags;
  const std::vector<std::string> unwritable = detail::unwritable_outputs(argc, argv, flags);
  for (const auto& problem : unwritable) std::fprintf(stderr, "gpucmp: %s; nothing was measured\n", problem.c_str());
  if (!unwritable.empty()) return exit_failures;
  if (!flags.search_log.empty()) {  // this run's searches only (checked writable above)
    if (std::FILE* started = std::fopen(flags.search_log.c_str(), "wb")) std::fclose(started);
  }
  // Read before Initialize, which takes Google Benchmark's flags out of argv.
  const bool typed_file = detail::writes_json_results(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return exit_failures;
  add_context();
  const std::string& no_device = detail::cached_no_device_reason();
  if (!no_device.empty()) std::fprintf(stderr, "gpucmp: %s; every GPU benchmark is skipped\n", no_device.c_str());
  if (typed_file) {
    typed_json_reporter file_reporter;  // Google Benchmark's JSON plus the typed rows
    benchmark::RunSpecifiedBenchmarks(nullptr, &file_reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  if (!flags.kernels_out.empty() && !detail::write_kernel_breakdowns(flags.kernels_out)) {
    std::fprintf(stderr, "gpucmp: cannot write kernel breakdowns to %s\n", flags.kernels_out.c_str());
    return exit_failures;
  }
  if (detail::tally().no_device) return exit_no_device;
  const detail::run_tally& t = detail::tally();
  if (!t.failed_names.empty()) {
    std::fprintf(stderr, "gpucmp: %d benchmark(s) failed:\n", t.failed);
    for (const auto& f : t.failed_names) std::fprintf(stderr, "  %s\n", f.c_str());
  }
  if (!t.context_lost_in.empty()) {
    std::fprintf(stderr, "gpucmp: the CUDA context was lost after an error in %s; every later benchmark was skipped\n",
                 t.context_lost_in.c_str());
  }
  return t.failed > 0 ? exit_failures : exit_ok;
}

}  // namespace gpucmp

/// A main() that runs every registered benchmark; see gpucmp::benchmark_main for the exit status.
#define GPUCMP_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return ::gpucmp::benchmark_main(argc, argv); }
