// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// For the operation sweeps: every timed algorithm candidate of every benchmark, appended as
// one JSON line to the file named by GPUCMP_SEARCH_LOG (nothing when unset), and the math
// libraries' versions in the benchmark context, so a table can say which builds it compared.
#pragma once

#include <gpucmp/gbench/adapter.hpp>
#include <gpucmp/io/json.hpp>  // gpucmp::detail::json_quoted
#include <gpucmp/ops/algorithm_search.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpucmp_bench {

/// Appends {"benchmark", "chosen", "candidates": [{"algorithm", "us", "timings", "duel_timings",
/// "failure"}]} to $GPUCMP_SEARCH_LOG ("us": the median of the "duel_timings" sustained timings
/// where there are any, else of the "timings" timings).
inline void log_search(const std::string& benchmark, const std::string& chosen,
                       const std::vector<gpucmp::candidate_time>& candidates) {
  const char* path = std::getenv("GPUCMP_SEARCH_LOG");
  if (path == nullptr || *path == '\0') return;
  std::string line = "{\"benchmark\": " + gpucmp::detail::json_quoted(benchmark) + ", \"chosen\": " + gpucmp::detail::json_quoted(chosen) +
                     ", \"candidates\": [";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    char us[32];
    std::snprintf(us, sizeof us, "%.3f", candidates[i].seconds * 1e6);
    line += std::string(i ? ", " : "") + "{\"algorithm\": " + gpucmp::detail::json_quoted(candidates[i].description) + ", \"us\": " + us +
            ", \"timings\": " + std::to_string(candidates[i].timings) +
            ", \"duel_timings\": " + std::to_string(candidates[i].duel_timings) + ", \"failure\": " +
            gpucmp::detail::json_quoted(candidates[i].failure) + "}";
  }
  line += "]}\n";
  if (FILE* f = std::fopen(path, "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

/// Adds "<key>" = version to the benchmark context.
inline void add_version_context(const char* key, std::size_t version) {
  benchmark::AddCustomContext(key, std::to_string(version));
}

}  // namespace gpucmp_bench
