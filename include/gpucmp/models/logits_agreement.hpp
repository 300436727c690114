// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How far a network's logits are from a reference's on the same images, as the quantized
// inference results state it beside every throughput: top-1 agreement (the share of images
// whose largest logit is the same class) and the largest relative error, norm-wise (the
// largest |got - reference| over the largest |reference|, over all images: element-wise ratios
// blow up at logits near zero), as scripts/models/compare-logits.py measures it. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {

/// One comparison of logits.
struct logits_agreement {
  std::int64_t images = 0;          ///< images compared
  std::int64_t same_top1 = 0;       ///< images whose top-1 class is the reference's
  double max_relative_error = 0;    ///< max |got - reference| / max |reference|
  /// Distinct top-1 classes among the reference's images: an agreement means little where a
  /// network (random weights, say) gives most images the same class.
  std::int64_t reference_classes = 0;

  /// same_top1 / images (0 with no images).
  double top1_agreement() const noexcept { return images > 0 ? double(same_top1) / double(images) : 0.0; }
};

/// Compares `got` with `reference`, both images x classes row by row. Throws invalid_argument
/// for sizes that are not images x classes or differ, and for a value that is not finite in
/// either (naming the image and class).
inline logits_agreement compare_logits(const std::vector<float>& reference, const std::vector<float>& got, std::int64_t classes) {
  if (classes <= 0 || reference.size() % std::size_t(classes) != 0 || got.size() != reference.size()) {
    throw invalid_argument("compare_logits: " + std::to_string(got.size()) + " logits against " +
                           std::to_string(reference.size()) + " of " + std::to_string(classes) + " classes per image");
  }
  logits_agreement a;
  a.images = std::int64_t(reference.size()) / classes;
  double largest = 0, worst = 0;
  std::set<std::int64_t> classes_seen;
  for (std::int64_t i = 0; i < a.images; ++i) {
    std::int64_t best_ref = 0, best_got = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const std::size_t at = std::size_t(i * classes + c);
      if (!std::isfinite(reference[at]) || !std::isfinite(got[at])) {
        throw invalid_argument("compare_logits: image " + std::to_string(i) + ", class " + std::to_string(c) +
                               " is not finite (reference " + std::to_string(reference[at]) + ", got " +
                               std::to_string(got[at]) + ")");
      }
      if (reference[at] > reference[std::size_t(i * classes + best_ref)]) best_ref = c;
      if (got[at] > got[std::size_t(i * classes + best_got)]) best_got = c;
      largest = std::max(largest, std::fabs(double(reference[at])));
      worst = std::max(worst, std::fabs(double(got[at]) - double(reference[at])));
    }
    a.same_top1 += best_ref == best_got;
    classes_seen.insert(best_ref);
  }
  a.reference_classes = std::int64_t(classes_seen.size());
  a.max_relative_error = largest > 0 ? worst / largest : worst;
  return a;
}

}  // namespace gpucmp
