// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The files a run writes besides Google Benchmark's own: kernel-mode breakdowns
// (--gpucmp_kernels_out), the search log (--gpucmp_search_log), and the check, before
// anything is measured, that every output file can be written.
#pragma once

#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/io/json.hpp>
#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/version.hpp>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gpucmp {

namespace detail {

/// Writes every kernel-mode breakdown of this process as JSON; false when the file cannot be written.
inline bool write_kernel_breakdowns(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return false;
  std::fprintf(file, "{\n  \"gpucmp_version\": \"%s\",\n  \"breakdowns\": [", version_string);
  const auto& list = kernel_breakdowns();
  for (std::size_t b = 0; b < list.size(); ++b) {
    std::fprintf(file, "%s\n    {\"benchmark\": %s, \"kernels\": [", b ? "," : "", json_quoted(list[b].benchmark).c_str());
    for (std::size_t k = 0; k < list[b].kernels.size(); ++k) {
      const kernel_stat& s = list[b].kernels[k];
      std::fprintf(file,
                   "%s\n      {\"name\": %s, \"kind\": \"%s\", \"count\": %zu, \"per_launch\": %.6g, "
                   "\"total_s\": %.9g, \"median_s\": %.9g, \"share\": %.6g, \"exposed_s\": %.9g, \"exposed_share\": %.6g}",
                   k ? "," : "", json_quoted(s.name).c_str(), to_string(s.kind), s.count, s.per_launch, s.total_s,
                   s.median_s, s.share, s.exposed_s, s.exposed_share);
    }
    std::fprintf(file, "\n    ]}");
  }
  std::fprintf(file, "\n  ]\n}\n");
  return std::fclose(file) == 0;
}

/// Appends one search to the search log at `path` as a JSON line: {"benchmark", "operation",
/// "chosen", "search_wall_s", "candidates": [{"algorithm", "us", "timings", "duel_timings",
/// "failure"}]} ("us": the median of the sustained duel's timings where there are any, else
/// of the trials'). Returns false when the file cannot be written.
inline bool append_search_log(const std::string& path, const std::string& benchmark, const std::string& operation,
                              const std::string& chosen, double search_wall_s, const std::vector<candidate_time>& candidates) {
  auto number = [](double v) { return to_json_text(json::make_number(v)); };  // NaN, inf: null
  std::string line = "{\"benchmark\": " + json_quoted(benchmark) + ", \"operation\": " + json_quoted(operation) +
                     ", \"chosen\": " + json_quoted(chosen) + ", \"search_wall_s\": " + number(search_wall_s) +
                     ", \"candidates\": [";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const candidate_time& c = candidates[i];
    line += std::string(i ? ", " : "") + "{\"algorithm\": " + json_quoted(c.description) +
            ", \"us\": " + number(c.seconds * 1e6) + ", \"timings\": " + std::to_string(c.timings) +
            ", \"duel_timings\": " + std::to_string(c.duel_timings) + ", \"failure\": " + json_quoted(c.failure) + "}";
  }
  line += "]}\n";
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) return false;
  const bool written = std::fputs(line.c_str(), file) >= 0;
  return std::fclose(file) == 0 && written;
}

}  // namespace detail

namespace detail {

/// "" when `path` can be written (an existing file is left as it was, a new one removed
/// again), else why not; checked before anything is measured, so no measurement is lost.
inline std::string unwritable_reason(const std::string& path) {
  std::FILE* existing = std::fopen(path.c_str(), "rb");
  const bool existed = existing != nullptr;
  if (existing != nullptr) std::fclose(existing);
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) return std::strerror(errno);
  std::fclose(file);
  if (!existed) std::remove(path.c_str());
  return "";
}

/// The output files a command line names (--benchmark_out, --gpucmp_kernels_out, --gpucmp_search_log)
/// that cannot be written, each with its flag and the reason; empty when all can be.
inline std::vector<std::string> unwritable_outputs(int argc, char** argv, const gpucmp_flags& flags) {
  std::vector<std::string> problems;
  auto check = [&](const std::string& flag, const std::string& path) {
    if (path.empty()) return;
    const std::string why = unwritable_reason(path);
    if (!why.empty()) problems.push_back(flag + "=" + path + ": cannot be written (" + why + ")");
  };
  const std::string out_flag = "--benchmark_out=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(out_flag, 0) == 0) check("--benchmark_out", arg.substr(out_flag.size()));
  }
  check("--gpucmp_kernels_out", flags.kernels_out);
  check("--gpucmp_search_log", flags.search_log);
  return problems;
}

}  // namespace detail

}  // namespace gpucmp
