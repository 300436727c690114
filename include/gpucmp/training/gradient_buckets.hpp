// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Buckets of parameter gradients for data-parallel training, as torch's DistributedDataParallel
// forms them: the backward pass finishes gradients last layer first, and each bucket is
// all-reduced as soon as its last gradient is final, while the rest of the backward pass
// runs, instead of one all-reduce after it. A bucket closes once it holds at least
// `bucket_bytes` (DDP's default: 25 MiB); the last closes with the backward pass. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace gpucmp {

/// A run of parameter gradients in one of a training step's two gradient arrays: the
/// filters' (in the precision's type) or the rest (FP32). Offsets and counts in elements.
struct gradient_span {
  bool filters = false;
  std::size_t offset = 0, count = 0;
  bool operator==(const gradient_span& o) const noexcept {
    return filters == o.filters && offset == o.offset && count == o.count;
  }
};

/// Gradients all-reduced together once backward piece `after_piece` (the last that finishes
/// one of them) has run.
struct gradient_bucket {
  std::size_t after_piece = 0;
  std::vector<gradient_span> spans;  ///< adjacent spans of one array merged
  std::size_t bytes = 0;
};

/// Buckets for a backward pass whose piece j finishes the spans `final_after[j]` (each
/// gradient in exactly one piece). `filter_element_bytes`: the filters' element size.
/// `bucket_bytes` 0 gives one bucket after the last piece that finishes a gradient.
inline std::vector<gradient_bucket> plan_gradient_buckets(const std::vector<std::vector<gradient_span>>& final_after,
                                                          std::size_t filter_element_bytes, std::size_t bucket_bytes) {
  if (filter_element_bytes == 0) throw invalid_argument("plan_gradient_buckets: the filters' element size must be positive");
  std::vector<gradient_bucket> buckets;
  gradient_bucket open;
  for (std::size_t j = 0; j < final_after.size(); ++j) {
    for (const gradient_span& s : final_after[j]) {
      if (s.count == 0) continue;
      open.after_piece = j;
      open.bytes += s.count * (s.filters ? filter_element_bytes : sizeof(float));
      // Backward finishes gradients in reverse order of the arrays, so a span often ends
      // where the previous one began: merge them into one call.
      gradient_span* adjacent = nullptr;
      for (gradient_span& o : open.spans) {
        if (o.filters == s.filters && (o.offset == s.offset + s.count || s.offset == o.offset + o.count)) adjacent = &o;
      }
      if (adjacent != nullptr) {
        const std::size_t begin = adjacent->offset < s.offset ? adjacent->offset : s.offset;
        adjacent->count += s.count;
        adjacent->offset = begin;
      } else {
        open.spans.push_back(s);
      }
    }
    if (!open.spans.empty() && bucket_bytes != 0 && open.bytes >= bucket_bytes) {
      buckets.push_back(open);
      open = gradient_bucket{};
    }
  }
  if (!open.spans.empty()) buckets.push_back(open);
  return buckets;
}

}  // namespace gpucmp
