// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// For the operation sweeps: the math libraries' versions in the benchmark context, so a
// table can say which builds it compared.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>

namespace gpucmp_bench {

/// Adds "<key>" = version to the benchmark context.
inline void add_version_context(const char* key, std::size_t version) {
  benchmark::AddCustomContext(key, std::to_string(version));
}

}  // namespace gpucmp_bench
