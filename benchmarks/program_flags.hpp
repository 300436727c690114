// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The bundled programs' own flags (--name=value), taken out of argv before Google Benchmark
// sees it (it rejects flags it does not know).
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_bench {

/// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream s(text);
  for (std::string part; std::getline(s, part, ',');) parts.push_back(part);
  return parts;
}

/// The value of `arg` when it is `flag` followed by the value (flag ends with '='), else null.
inline const char* flag_value(const char* arg, const char* flag) {
  const std::size_t n = std::strlen(flag);
  return std::strncmp(arg, flag, n) == 0 ? arg + n : nullptr;
}

/// "--batches=" values: whole numbers of at least `minimum`; throws invalid_argument naming
/// `program` and the value otherwise.
inline std::vector<std::int64_t> parse_batches(const char* text, long long minimum, const std::string& program) {
  std::vector<std::int64_t> batches;
  for (const auto& b : split_list(text)) {
    const long long n = std::stoll(b);
    if (n < minimum) throw gpucmp::invalid_argument(program + ": --batches must be at least " + std::to_string(minimum) + ", got " + b);
    batches.push_back(n);
  }
  return batches;
}

}  // namespace gpucmp_bench
