// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The bundled programs' own flags (--name=value), taken out of argv before Google Benchmark
// sees it (it rejects flags it does not know).
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

/// `text` as a whole number from `minimum` to `maximum`, all of it; otherwise throws
/// invalid_argument naming `program`, `flag` and the text. (std::stoll takes "64x" as 64,
/// std::stoull takes "-1" as 2^64 - 1, and for "abc" both throw with only their own name.)
inline long long whole_number(const std::string& text, long long minimum, long long maximum, const std::string& program,
                              const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || n < minimum || n > maximum) {
    throw gpucmp::invalid_argument(program + ": " + flag + " must be a whole number from " + std::to_string(minimum) +
                                   " to " + std::to_string(maximum) + ", got '" + text + "'");
  }
  return n;
}

/// `text` as a finite number from `minimum` to `maximum`, all of it; otherwise throws
/// invalid_argument naming `program`, `flag` and the text.
inline double real_number(const std::string& text, double minimum, double maximum, const std::string& program,
                          const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(x) || x < minimum ||
      x > maximum) {
    char range[64];
    std::snprintf(range, sizeof range, "%g to %g", minimum, maximum);
    throw gpucmp::invalid_argument(program + ": " + flag + " must be a number from " + range + ", got '" + text + "'");
  }
  return x;
}

/// "--batches=" values: whole numbers of at least `minimum`; throws invalid_argument naming
/// `program` and the value otherwise.
inline std::vector<std::int64_t> parse_batches(const char* text, long long minimum, const std::string& program) {
  std::vector<std::int64_t> batches;
  for (const auto& b : split_list(text)) batches.push_back(whole_number(b, minimum, std::int64_t{1} << 32, program, "--batches"));
  if (batches.empty()) throw gpucmp::invalid_argument(program + ": --batches needs at least one batch");
  return batches;
}

}  // namespace gpucmp_bench
