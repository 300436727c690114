// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where gpucmp's split-KV decode kernel (ops/decode_attention_kernel.cuh) applies, the chunk
// sizes it is offered at, and the partial sums a call leaves. Host-only.
#pragma once

#include <gpucmp/ops/attention_problem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpucmp {

/// Chunks of one sequence's keys at most (what the partial sums' buffer is sized for).
inline constexpr std::int64_t decode_attention_max_chunks = 64;

/// Whether the split-KV decode kernel computes `p`: a BF16 or FP16 forward of one query token
/// a sequence, no mask, not packed, head_dim 64, 128 or 256, 1, 2, 4 or 8 query heads a KV head,
/// at most 2^30 keys, pages (if paged) of a power of two keys, at least 16.
inline bool decode_attention_applies(const attention_problem& p) noexcept {
  const std::int64_t group = p.kv_heads > 0 ? p.q_heads / p.kv_heads : 0;
  const bool one_query = p.seq_q == 1 && std::all_of(p.q_lengths.begin(), p.q_lengths.end(), [](std::int64_t l) { return l == 1; });
  return p.pass == attention_pass::forward && !p.is_fp8() && !p.packed && one_query && p.mask == attention_mask::none &&
         (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256) &&
         (group == 1 || group == 2 || group == 4 || group == 8) && p.batch <= 65535 && p.kv_heads <= 65535 &&
         p.seq_kv <= (std::int64_t(1) << 30) &&            // key indices in 32 bits
         (p.page_size == 0 || (p.page_size >= 16 && (p.page_size & (p.page_size - 1)) == 0));  // a tile in one page
}

/// The chunk sizes (keys a block) offered for `p`: powers of two from 32 keys, each splitting
/// a sequence into at most decode_attention_max_chunks chunks, and one chunk for the whole
/// sequence (no merge); empty where the kernel does not apply.
inline std::vector<std::int64_t> decode_attention_chunks(const attention_problem& p) {
  std::vector<std::int64_t> chunks;
  if (!decode_attention_applies(p)) return chunks;
  for (std::int64_t c = 32; c < p.seq_kv && c <= 4096; c *= 2) {
    if ((p.seq_kv + c - 1) / c <= decode_attention_max_chunks) chunks.push_back(c);
  }
  chunks.push_back(p.seq_kv);
  return chunks;
}

/// FP32 values of the partial sums one call leaves for `p` at chunks of `chunk` keys: a
/// maximum, a sum and head_dim weighted values for every chunk, query head and sequence.
inline std::size_t decode_attention_partial_floats(const attention_problem& p, std::int64_t chunk) {
  const std::int64_t chunks = (p.seq_kv + chunk - 1) / chunk;
  return chunks <= 1 ? 0 : std::size_t(p.batch * p.q_heads * chunks * (p.head_dim + 2));
}

}  // namespace gpucmp
