// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where a training step's time goes: training_network::trace_step traces a step piece by
// piece in kernel mode, each piece named "<part>: <layer>" ("weight gradient: layer1.0.conv1");
// times_by_part sums the pieces by part, so a step reads as "convolution forward 21 %, batch
// norm backward 18 %, ..." and the next optimisation is the largest part. Host code over a
// network_trace, tested without a GPU.
#pragma once

#include <gpucmp/models/layer_trace.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace gpucmp {

/// One part of a traced training step: every piece that does the same thing.
struct step_part_time {
  std::string part;        ///< what the pieces do: their names before ": "
  std::size_t pieces = 0;  ///< how many of the step's pieces do it
  double busy_s = 0;       ///< the pieces' busy times (each a median over the passes), summed
  double share = 0;        ///< busy_s over the step's busy time (the median pass's)
};

/// The part of a piece's name: the text before the first ": ", or the whole name.
inline std::string step_part_of(const std::string& piece) {
  const std::size_t colon = piece.find(": ");
  return colon == std::string::npos ? piece : piece.substr(0, colon);
}

/// A traced step's pieces summed by part, largest busy time first (ties by name).
inline std::vector<step_part_time> times_by_part(const network_trace& trace) {
  std::map<std::string, step_part_time> parts;
  for (const layer_trace& piece : trace.layers) {
    const std::string part = step_part_of(piece.layer);
    step_part_time& p = parts[part];
    p.part = part;
    p.pieces += 1;
    p.busy_s += piece.busy_s;
  }
  std::vector<step_part_time> out;
  for (auto& [name, p] : parts) {
    p.share = trace.busy_s > 0 ? p.busy_s / trace.busy_s : 0.0;
    out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(), [](const step_part_time& a, const step_part_time& b) { return a.busy_s > b.busy_s; });
  return out;
}

}  // namespace gpucmp
