// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The Catch2 session shared by all test binaries (holds Catch2 v2's implementation).
#if GPUCMP_CATCH2_MAJOR >= 3
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "catch.hpp"

#include <gpucmp/cuda/device.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace gpucmp_test {

int run_session(int argc, char** argv, bool needs_gpu) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  if (needs_gpu && !listing) {
    const std::string reason = gpucmp::no_device_reason();
    if (!reason.empty()) {
      std::printf("SKIPPED [gpu]: %s\n", reason.c_str());
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}

}  // namespace gpucmp_test
