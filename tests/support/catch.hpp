// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One include for tests, whichever Catch2 major version (2 on Debian 12, 3 on Ubuntu 24.04)
// the build found.
#pragma once

#if GPUCMP_CATCH2_MAJOR >= 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
/// Matcher: the string contains `text`.
#define GPUCMP_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
#else
#include <catch2/catch.hpp>
/// Matcher: the string contains `text`.
#define GPUCMP_CONTAINS(text) Catch::Contains(text)
#endif

#include <cstdlib>
#include <string>

// Timing in the GPU tests. A test case whose purpose is a timing bound is tagged [timing],
// and sanitizer runs leave it out (~[timing]). A timing bound inside any other test case is
// written GPUCMP_CHECK_TIMING: it checks nothing under GPUCMP_TEST_NO_TIMING=1, so the rest
// of that case still runs under the sanitizers. Each bound's comment says why it holds and
// where its margin comes from (results/h200/reliability/timing_margins.md). A test case that
// provokes a CUDA API error on purpose (an invalid launch, an allocation that cannot fit) is
// tagged [api_error], so the sanitizers count API errors everywhere else.
#define GPUCMP_CHECK_TIMING(...)                                    \
  do {                                                              \
    if (::gpucmp_test::timing_checks_on()) CHECK(__VA_ARGS__);      \
  } while (false)

namespace gpucmp_test {
/// False when GPUCMP_TEST_NO_TIMING=1: a sanitizer (scripts/sanitize.sh) slows every kernel
/// and launch, so bounds on how fast the GPU ran cannot hold there.
inline bool timing_checks_on() {
  const char* off = std::getenv("GPUCMP_TEST_NO_TIMING");
  return off == nullptr || std::string(off) != "1";
}

/// Runs the Catch2 session. When `needs_gpu` and no CUDA device is usable, prints why and
/// returns 77 (CTest's SKIP_RETURN_CODE) instead of running tests; listing still works.
int run_session(int argc, char** argv, bool needs_gpu);
}  // namespace gpucmp_test
