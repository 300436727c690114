// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The copy row a memory-bound row is read against (scripts/bandwidth-fraction.py): a verified
// copy kernel that moves the same bytes in the same run, one row per distinct size.
#pragma once

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/memory.cuh>

#include <cstdint>
#include <set>
#include <string>
#include <utility>

namespace gpucmp_bench {

/// Registers copy/kernel/<bytes>/<mode> for an operation of work `w` timed in mode `m`, unless
/// one of that size and mode is registered: a copy of B bytes moves 2B, the bytes an operation
/// that reads and writes 2B in all moves.
inline void register_copy_for(const gpucmp::work& w, gpucmp::mode m = gpucmp::mode::graph) {
  static std::set<std::pair<std::int64_t, gpucmp::mode>> copies;
  const std::int64_t bytes = (std::int64_t((w.bytes_read + w.bytes_written) / 2) + 15) / 16 * 16;
  if (!copies.insert({bytes, m}).second) return;
  gpucmp::register_benchmark("copy/kernel/" + std::to_string(bytes),
                             [bytes](gpucmp::state& st) {
                               gpucmp::memory_bandwidth m(gpucmp::memory_op::copy_kernel, std::size_t(bytes), st.stream());
                               gpucmp::run_verified(st, m);
                             },
                             {m});
}

}  // namespace gpucmp_bench
