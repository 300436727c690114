// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp::benchmark_main and GPUCMP_BENCHMARK_MAIN: flags, context, the run, the exit status.
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/gbench/context.hpp>
#include <gpucmp/gbench/debug_library_note.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/output_files.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/registration.hpp>
#include <gpucmp/gbench/result_rows.hpp>
#include <gpucmp/measure/progress.hpp>

#include <benchmark/benchmark.h>
#include <unistd.h>  // isatty

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace gpucmp {

/// A complete main: takes gpucmp's flags (--help lists them: detail::gpucmp_flags_help(); a
/// bad one is named and nothing runs), selects --gpucmp_device, checks every output file can
/// be written, parses Google Benchmark's flags, adds the context, runs the registered
/// benchmarks and returns an exit_status (77 when there is no CUDA device).
/// --gpucmp_search_log=FILE starts FILE anew. `cuda_arch_list`: the GPU architectures the
/// program carries (GPUCMP_CUDA_ARCH_LIST, as GPUCMP_BENCHMARK_MAIN passes it; see add_context).
inline int benchmark_main(int argc, char** argv, const char* cuda_arch_list = nullptr) {
  const detail::gpucmp_flags flags = detail::take_gpucmp_flags(argc, argv);
  if (!flags.error.empty()) {
    std::fprintf(stderr, "gpucmp: %s\n", flags.error.c_str());
    return exit_failures;
  }
  detail::flags_everywhere() = flags;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--help") continue;
    // Google Benchmark then prints its own flags and exits; gpucmp's come first.
    std::fputs(detail::gpucmp_flags_help_text().c_str(), stdout);
    std::fflush(stdout);
    break;
  }
  if (flags.device >= 0 && detail::cached_no_device_reason().empty()) {
    try {
      select_device(flags.device);
    } catch (const error& e) {
      std::fprintf(stderr, "gpucmp: --gpucmp_device=%d: %s; nothing was measured\n", flags.device, e.what());
      return exit_failures;
    }
  }
  if (flags.progress == "on" || (flags.progress == "auto" && ::isatty(::fileno(stderr)))) {
    progress_output() = [](const std::string& line) { std::fprintf(stderr, "gpucmp: %s\n", line.c_str()); };
  }
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
  add_context(cuda_arch_list);
  const std::string& no_device = detail::cached_no_device_reason();
  if (!no_device.empty()) std::fprintf(stderr, "gpucmp: %s; every GPU benchmark is skipped\n", no_device.c_str());
  const detail::debug_library_note debug_note(std::cerr);  // Google Benchmark writes its context there
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
/// In a CUDA file it records the architectures nvcc built it for (a target's CUDA files are
/// built alike); in a C++ file they are "unknown".
#define GPUCMP_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return ::gpucmp::benchmark_main(argc, argv, GPUCMP_CUDA_ARCH_LIST); }
