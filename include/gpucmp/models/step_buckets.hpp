// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The shapes a serving step is padded up to, as serving engines pad theirs: a few shapes, each
// built, verified and (for decode) captured as a CUDA graph once, instead of one per batch and
// prompt length. A decode step's batch goes up to a power of two (its graph is replayed every
// step, so few graphs matter more than a few padded rows). A prefill's longest prompt goes up to
// a power of two or 1.5 times one (1, 2, 3, 4, 6, 8, 12, ...): at most a third of its rows are
// padding, against half with powers of two alone, for twice the shapes. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpucmp {

/// The batch a step of `sequences` runs as: the smallest power of two at least that, at most
/// `largest`. Throws invalid_argument for a count outside 1..largest.
inline std::int64_t batch_bucket(std::int64_t sequences, std::int64_t largest) {
  if (sequences < 1 || sequences > largest) {
    throw invalid_argument("batch_bucket: " + std::to_string(sequences) + " sequences, not 1 to " + std::to_string(largest));
  }
  std::int64_t b = 1;
  while (b < sequences) b *= 2;
  return std::min(b, largest);
}

/// The rows a prefill runs a sequence as when its longest prompt has `tokens`: the smallest 2^k
/// or 3 x 2^(k-1) at least that, at most `largest`. Throws invalid_argument for a prompt outside
/// 1..largest.
inline std::int64_t token_bucket(std::int64_t tokens, std::int64_t largest) {
  if (tokens < 1 || tokens > largest) {
    throw invalid_argument("token_bucket: a prompt of " + std::to_string(tokens) + " tokens, not 1 to " + std::to_string(largest));
  }
  std::int64_t p = 1;
  while (p < tokens) p *= 2;               // p / 2 < tokens <= p
  const std::int64_t three_quarters = p / 4 * 3;  // 1.5 x (p / 2), when p / 2 is even
  const std::int64_t b = p >= 4 && three_quarters >= tokens ? three_quarters : p;
  return std::min(b, largest);
}

}  // namespace gpucmp
