// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Markdown cells of kernel-mode traces, shared by the programs that write --layers_out.
#pragma once

#include <gpucmp/models/layer_trace.hpp>

#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>

namespace gpucmp_bench {

/// "name (2/pass), other (1/pass)": a traced layer's kernels, largest first, at most `most`
/// of them, with the markdown table's separator escaped.
inline std::string kernels_cell(const gpucmp::layer_trace& layer, std::size_t most = std::numeric_limits<std::size_t>::max()) {
  std::string cell;
  for (std::size_t i = 0; i < layer.kernels.size() && i < most; ++i) {
    if (!cell.empty()) cell += ", ";
    char count[32];
    std::snprintf(count, sizeof count, " (%g/pass)", layer.kernels[i].per_launch);
    cell += layer.kernels[i].name + count;
  }
  std::string escaped;
  for (char c : cell) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

}  // namespace gpucmp_bench
