// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How far a network's logits are from a reference's on the same images, as the quantized
// inference results state it beside every throughput: top-1 agreement (the share of images
// whose largest logit is the same class) and the largest relative error, norm-wise (the
// largest |got - reference| over the largest |reference|, over all images: element-wise ratios
// blow up at logits near zero), as scripts/models/compare-logits.py measures it; and the same
// two on centred logits. Host-only.
//
// Why centred: with random weights every image's pooled features share a large common part,
// which picks one class for all images (FP32 gave 512 random images one class), so a raw
// top-1 agreement says nothing. Taking each class's mean reference logit over the images out
// of both sides (the classifier's bias calibrated to the images) leaves the image-specific
// part, which is what a network's errors distort: the top-1 then varies from image to image.
// (compare-logits.py centres each side on its own mean; here both lose the reference's, so a
// network's own per-class offset still counts against it.)
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
  /// The same three on centred logits: each class's mean reference logit over the images
  /// subtracted from both sides' logits of that class.
  std::int64_t centred_same_top1 = 0;
  double centred_max_relative_error = 0;
  std::int64_t centred_reference_classes = 0;

  /// same_top1 / images (0 with no images).
  double top1_agreement() const noexcept { return images > 0 ? double(same_top1) / double(images) : 0.0; }
  /// centred_same_top1 / images (0 with no images).
  double centred_top1_agreement() const noexcept { return images > 0 ? double(centred_same_top1) / double(images) : 0.0; }
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
  for (std::size_t at = 0; at < reference.size(); ++at) {
    if (!std::isfinite(reference[at]) || !std::isfinite(got[at])) {
      const std::int64_t i = std::int64_t(at) / classes, c = std::int64_t(at) % classes;
      throw invalid_argument("compare_logits: image " + std::to_string(i) + ", class " + std::to_string(c) +
                             " is not finite (reference " + std::to_string(reference[at]) + ", got " + std::to_string(got[at]) +
                             ")");
    }
  }
  std::vector<double> mean(std::size_t(classes), 0.0);  // each class's mean reference logit
  for (std::size_t at = 0; at < reference.size(); ++at) mean[at % std::size_t(classes)] += reference[at];
  for (double& m : mean) m /= double(std::max<std::int64_t>(a.images, 1));
  // Top-1 agreement, distinct reference classes and the norm-wise error with `shift` taken out.
  auto measure = [&](const std::vector<double>& shift, std::int64_t& same, std::int64_t& distinct, double& relative) {
    double largest = 0, worst = 0;
    std::set<std::int64_t> seen;
    for (std::int64_t i = 0; i < a.images; ++i) {
      std::int64_t best_ref = 0, best_got = 0;
      double top_ref = 0, top_got = 0;
      for (std::int64_t c = 0; c < classes; ++c) {
        const std::size_t at = std::size_t(i * classes + c);
        const double r = double(reference[at]) - shift[std::size_t(c)], g = double(got[at]) - shift[std::size_t(c)];
        if (c == 0 || r > top_ref) {
          top_ref = r;
          best_ref = c;
        }
        if (c == 0 || g > top_got) {
          top_got = g;
          best_got = c;
        }
        largest = std::max(largest, std::fabs(r));
        worst = std::max(worst, std::fabs(g - r));
      }
      same += best_ref == best_got;
      seen.insert(best_ref);
    }
    distinct = std::int64_t(seen.size());
    relative = largest > 0 ? worst / largest : worst;
  };
  measure(std::vector<double>(std::size_t(classes), 0.0), a.same_top1, a.reference_classes, a.max_relative_error);
  measure(mean, a.centred_same_top1, a.centred_reference_classes, a.centred_max_relative_error);
  return a;
}

}  // namespace gpucmp
