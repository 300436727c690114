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

namespace gpucmp_test {
/// Runs the Catch2 session. When `needs_gpu` and no CUDA device is usable, prints why and
/// returns 77 (CTest's SKIP_RETURN_CODE) instead of running tests; listing still works.
int run_session(int argc, char** argv, bool needs_gpu);
}  // namespace gpucmp_test
